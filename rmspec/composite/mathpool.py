"""math-verify in worker processes, each call under a wall-clock limit.

math-verify times itself out with `signal.alarm`, which works only in a process's main thread
(verl PR #5635: in Ray workers every score came back 0; PR #5839: with the alarm off, training
hung). Here each call runs in the main thread of a worker process, with math-verify's own alarm
armed and `raise_on_error=True` (so a timeout or a parse failure is an exception, never a quiet
False). The parent waits at most the limit; a worker past it is killed and replaced, and the call
counts as `timeout`. Callers in threads (the server's, or `check_many`'s) each hold one worker,
so a hung call never delays another beyond its own worker.

A worker that cannot start (math-verify not importable, the process dying at start) is never
counted as a row's `parse_error`: the call raises WorkerStartError (exit 2, naming `rmspec[rules]`)
and so does every later call. A replacement that fails to start leaves its slot empty, and the next
call on that slot starts one. `close()` makes a running or waiting check raise PoolClosed.

Workers are started with `spawn`: forking a process that runs threads (uvicorn, torch) can copy a
held lock. A new worker imports math-verify before it takes work; the limit counts from the
moment the task is sent, so that start-up is never charged to a call.
"""

from __future__ import annotations

import atexit
import math
import multiprocessing as mp
import queue
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rmspec.composite.outcome import Outcome, failed, ok
from rmspec.errors import RmspecError

READY_TIMEOUT_S = 300.0  # a worker importing sympy on a contended machine


DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed\b")  # $...$, \(...\), \[...\], \boxed{...}


def gold_text(reference: str) -> str:
    """The reference as math-verify reads it: LaTeX. A MATH-style reference (verl's ground_truth) is
    bare LaTeX, which math-verify's plain-expression reading cuts short (`3\\sqrt{2}` as 3, `\\{-2, 2\\}`
    as 2), so it is wrapped in \\boxed{} as verl wraps it; one already delimited is read as written."""
    return reference if DELIMITED.search(reference) else "\\boxed{" + reference.strip() + "}"


def check_answer(gold: str, answer: str, limit_s: float) -> tuple[str, float | None, str | None]:
    """Gold first, as math-verify requires: ("ok", 1.0 | 0.0, None) or (reason, None, detail).
    Must run in a main thread (math-verify's signal.alarm)."""
    from math_verify import LatexExtractionConfig, parse, verify
    from math_verify.errors import TimeoutException

    seconds = max(1, math.ceil(limit_s))
    try:
        gold_parsed = parse(gold_text(gold), [LatexExtractionConfig()], parsing_timeout=seconds, raise_on_error=True)
        if not gold_parsed:  # not LaTeX at all (e.g. "five"): math-verify's own reading of the text
            gold_parsed = parse(gold, parsing_timeout=seconds, raise_on_error=True)
        if not gold_parsed:
            return "parse_error", None, "no answer could be read from the reference"
        answer_parsed = parse(answer, parsing_timeout=seconds, raise_on_error=True)
        if not answer_parsed:
            return "parse_error", None, "no answer could be read from the response"
        right = verify(gold_parsed, answer_parsed, timeout_seconds=seconds, raise_on_error=True)
    except TimeoutException:
        return "timeout", None, f"math-verify ran past {seconds} s"
    except Exception as exc:  # math-verify/sympy failures on odd input: counted, never a silent 0
        return "parse_error", None, f"math-verify raised {type(exc).__name__}"
    return "ok", 1.0 if right else 0.0, None


def _serve(conn: Any) -> None:
    """A worker's loop (its main thread): import once, say ready, then answer tasks until EOF. An
    import that fails is reported to the parent (never a traceback per worker on stderr)."""
    try:
        import math_verify  # noqa: F401  # the import is the slow part of a start
    except BaseException as exc:  # ImportError, or a broken install raising anything else
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            gold, answer, limit_s = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(check_answer(gold, answer, limit_s))


class WorkerStartError(RmspecError):
    """A math-verify worker could not start (math-verify not importable, the process died at start):
    every later call would fail the same way, so the pool stops and says so."""

    def __init__(self, why: str):
        super().__init__(
            f"the math-verify workers cannot start ({why}); no math_answer value can be computed",
            "pip install 'rmspec[rules]' (math-verify), then run the command again",
        )


class PoolClosed(RuntimeError):
    """The pool was closed before or while a check ran: the check has no result."""


@dataclass
class _Worker:
    process: Any
    conn: Any
    ready: bool = False
    # close() and the check that holds the worker may both kill it at once: closing its pipe twice
    # concurrently closes a file descriptor twice (EBADF, or another file's if the number was reused).
    _killing: threading.Lock = field(default_factory=threading.Lock)

    def wait_ready(self) -> None:
        if self.ready:
            return
        if not self.conn.poll(READY_TIMEOUT_S):
            raise WorkerStartError(f"a worker did not start within {READY_TIMEOUT_S:.0f} s")
        try:
            status, detail = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(timeout=5)
            raise WorkerStartError(f"a worker exited at start, code {self.process.exitcode}") from None
        if status != "ready":
            raise WorkerStartError(detail)
        self.ready = True

    def kill(self) -> None:
        """Killed and reaped: no hung math-verify process outlives its call. Safe from two threads at once."""
        with self._killing:
            self.process.kill()
            self.process.join(timeout=5)
            self.conn.close()  # a second close of the same Connection is a no-op


class MathPool:
    """`check(gold, answer)` -> Outcome within `limit_s` (+ the time to hand the result back).

    Each idle slot holds a worker, or None where a replacement could not be started (the next call
    on that slot starts one). Workers that cannot start at all (math-verify missing) raise
    WorkerStartError on that call and every later one; `close()` makes a running check raise
    PoolClosed."""

    def __init__(self, workers: int = 2, limit_s: float = 5.0):
        self.size, self.limit_s = workers, limit_s
        self._ctx = mp.get_context("spawn")
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self.replaced = 0
        self.closed = False
        self.broken: WorkerStartError | None = None
        for _ in range(workers):
            self._idle.put(self._start())
        atexit.register(self.close)

    def _start(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child,), daemon=True, name="rmspec-math-verify")
        process.start()
        child.close()
        worker = _Worker(process, parent)
        with self._lock:
            self._all.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:  # close() may have taken it already
                self._all.remove(worker)

    def _replace(self, worker: _Worker) -> _Worker | None:
        """The worker killed and a new one started; None when the start failed (retried on next use)."""
        self._retire(worker)
        with self._lock:
            self.replaced += 1
        if self.closed:
            return None
        try:
            return self._start()
        except Exception:  # e.g. out of processes or memory for a moment: the slot stays usable
            return None

    def _take(self) -> _Worker | None:
        while True:
            if self.closed:
                raise PoolClosed("the math-verify pool is closed")
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                continue

    def check(self, gold: str, answer: str, limit_s: float | None = None) -> Outcome:
        if self.broken is not None:
            raise self.broken
        limit = self.limit_s if limit_s is None else limit_s
        worker = self._take()
        try:
            if self.broken is not None:
                raise self.broken
            if worker is None:
                worker = self._start()
            worker.wait_ready()
            worker.conn.send((gold, answer, limit))
            if not worker.conn.poll(limit):
                if self.closed:
                    raise PoolClosed("the math-verify pool was closed while this check ran")
                worker = self._replace(worker)
                return failed("timeout", f"math-verify ran past {limit:g} s; its worker was replaced")
            status, value, detail = worker.conn.recv()
        except WorkerStartError as exc:
            self.broken = exc
            if worker is not None:
                self._retire(worker)
                worker = None
            raise
        except (EOFError, OSError):
            if worker is None:  # its replacement could not be started: this call says why, the slot stays
                raise
            if self.closed:
                raise PoolClosed("the math-verify pool was closed while this check ran") from None
            code = worker.process.exitcode
            worker = self._replace(worker)
            return failed("parse_error", f"the math-verify worker exited (code {code}); it was replaced")
        finally:
            if self.closed and worker is not None:
                self._retire(worker)
            elif not self.closed:
                self._idle.put(worker)
        return ok(value) if status == "ok" else failed(status, detail)

    def check_many(self, pairs: Sequence[tuple[str, str]], limit_s: float | None = None) -> list[Outcome]:
        """Every (gold, answer) pair, `size` at a time, in order."""
        if not pairs:
            return []
        with ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="math-verify") as pool:
            return list(pool.map(lambda p: self.check(p[0], p[1], limit_s), pairs))

    def close(self) -> None:
        self.closed = True
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.kill()


def check_inline(gold: str, answer: str, limit_s: float = 5.0) -> Outcome:
    """The same check in this process's main thread, with no pool (benchmarks, one-off use)."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("math-verify's signal.alarm needs the main thread: use MathPool off it")
    status, value, detail = check_answer(gold, answer, limit_s)
    return ok(value) if status == "ok" else failed(status, detail)  # type: ignore[arg-type]
