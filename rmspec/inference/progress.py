"""Progress of a long scoring pass: what is scored, n of N sequences, rate and ETA, every few seconds.

The batch loops (rmspec.inference.scoring.head_outputs, shared_prefix.grouped_head_outputs) call
``advance(n)`` after each forward pass; a caller that wants lines opens ``reporting(say, what, total)``
around the pass. Without it ``advance`` does nothing, so scoring inside a server or a test stays
quiet. A context variable, not an argument threaded through every scorer: the benchmark kinds call
the engine in many ways, and only the loops at the bottom know when a batch is done. Light: no torch.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EVERY_S = 5.0  # seconds between lines: a pass shorter than this prints nothing
ENV = "RMSPEC_PROGRESS_EVERY"  # seconds between lines instead of EVERY_S (0: a line per batch)


def every_s() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV, EVERY_S)))
    except ValueError:
        return EVERY_S


class _Pass:
    def __init__(self, say: Callable[[str], None], what: str, total: int | None, every_s: float):
        self.say, self.what, self.total, self.every_s = say, what, total, every_s
        self.done = 0
        self.started = self.last = time.monotonic()

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.total and self.done >= self.total:
            return  # the pass's end line says it (reporting), not a tick with nothing left
        if now - self.last >= self.every_s:
            self.last = now
            self.say(self.line(now))

    def line(self, now: float, end: bool = False) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        of = f"/{self.total:,}" if self.total else ""
        text = f"{self.what}: {self.done:,}{of} sequences, {rate:,.1f}/s"
        if end:
            return text + f", done in {_clock(elapsed)}"
        if self.total and rate > 0 and self.done < self.total:
            text += f", ETA {_clock((self.total - self.done) / rate)}"
        return text


_current: contextvars.ContextVar[_Pass | None] = contextvars.ContextVar("rmspec_scoring_pass", default=None)


@contextmanager
def reporting(
    say: Callable[[str], None] | None, what: str, total: int | None = None, every: float | None = None
) -> Iterator[None]:
    """Lines `WHAT: n/N sequences, rate/s, ETA` through ``say`` while the block scores, and one at its
    end when it took longer than ``every`` seconds (default: RMSPEC_PROGRESS_EVERY, else EVERY_S);
    ``say`` None reports nothing."""
    if say is None:
        yield
        return
    seconds = every if every is not None else every_s()
    current = _Pass(say, what, total, seconds)
    token = _current.set(current)
    try:
        yield
    finally:
        _current.reset(token)
        now = time.monotonic()
        if now - current.started >= seconds:
            say(current.line(now, end=True))


def advance(n: int) -> None:
    """n more sequences scored (called by the batch loops)."""
    current = _current.get()
    if current is not None:
        current.advance(n)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
