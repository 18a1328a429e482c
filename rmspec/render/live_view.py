"""The live view of a run: progress, step, loss, accuracy, learning rate, pairs and tokens seen, throughput, ETA.

Fed by the metrics.jsonl rows the child appends; light (rich only, no torch).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rmspec.render.console import make_console


@dataclass
class RunProgress:
    """What the view shows, folded from metrics rows."""

    step: int = 0
    max_steps: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    started: float | None = None  # wall time of the first row of this session
    start_step: int = 0
    last_time: float | None = None
    at: dict[str, int] = field(default_factory=dict)  # the step each metric was last written at
    final_of: int | None = None  # the final evaluation's row: the step whose weights it scored

    def update(self, row: dict) -> None:
        now = row.get("time", time.time())
        if row.get("event") == "train_begin" or self.started is None:
            self.started = now
            self.start_step = int(row.get("step", 0))
        if row.get("max_steps"):
            self.max_steps = int(row["max_steps"])
        if "step" in row:
            self.step = max(self.step, int(row["step"]))
        self.last_time = now
        for key, value in row.items():
            if isinstance(value, (int, float)) and key not in ("step", "max_steps", "time", "model_step"):
                self.metrics[key] = value
                self.at[key] = self.step
        self.final_of = row.get("model_step", self.final_of)

    def seconds_per_step(self) -> float | None:
        done = self.step - self.start_step
        if self.started is None or self.last_time is None or done <= 0:
            return None
        return (self.last_time - self.started) / done

    def eta_seconds(self) -> float | None:
        per = self.seconds_per_step()
        if per is None or not self.max_steps:
            return None
        return max(self.max_steps - self.step, 0) * per

    def first(self, *names: str) -> float | None:
        for name in names:
            for key, value in self.metrics.items():
                if key.endswith(name):
                    return value
        return None

    def step_of(self, *names: str) -> int | None:
        """The step at which the first of ``names`` that has a value was written."""
        for name in names:
            for key in self.metrics:
                if key.endswith(name):
                    return self.at.get(key)
        return None

    def current(self, *names: str, exact: bool = False) -> float | None:
        """The first of ``names`` written at this step: a plain line shows no value from an earlier step."""
        for name in names:
            for key, value in self.metrics.items():
                if (key == name if exact else key.endswith(name)) and self.at.get(key) == self.step:
                    return value
        return None

    def line(self) -> str:
        """One plain line per step (logs, CI, no terminal): the values written at this step only, so an
        evaluation every step next to a loss logged every few steps shows no stale loss."""
        final = self.final_of is not None
        if final:  # the final evaluation's row: its figures only, not the last step's training values
            parts = [f"final evaluation (the model of step {self.final_of})"]
        else:
            parts = [f"step {self.step}/{self.max_steps or '?'}"]
        for label, names in (
            ("loss", ("train/rm/loss", "train/sft/loss")),
            ("acc", ("train/rm/accuracy",)),
            ("lr", ("train/rm/lr", "train/sft/lr")),
            ("eval loss", ("eval/rm/loss", "eval/sft/loss")),
            ("eval acc", ("eval/rm/accuracy",)),
        ):
            value = self.current(*names)
            if value is not None and not (final and not label.startswith("eval")):
                parts.append(f"{label} {value:.4g}")
        if final:
            return "  ".join(parts)
        for label, name in (("episode", "episode"), ("tokens", "num_tokens")):
            if self.current(name, exact=True) is not None:
                parts.append(f"{label} {int(self.metrics[name]):,}")
        sps = self.current("samples_per_second", exact=True)
        if sps:
            parts.append(f"{sps:.1f} samples/s")
        eta = self.eta_seconds()
        if eta is not None and self.final_of is None and (self.max_steps or 0) > self.step:
            parts.append(f"ETA {format_seconds(eta)}")
        return "  ".join(parts)


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class MetricsFollower:
    """Reads rows appended to metrics.jsonl since the last call (a partial last line waits)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.offset = 0
        self.buffer = ""

    def new_rows(self) -> list[dict]:
        if not self.path.exists():
            return []
        with self.path.open("r", encoding="utf-8") as handle:
            size = self.path.stat().st_size
            if size < self.offset:  # rewritten (resume truncation): start over
                self.offset, self.buffer = 0, ""
            handle.seek(self.offset)
            chunk = handle.read()
            self.offset = handle.tell()
        text = self.buffer + chunk
        lines = text.split("\n")
        self.buffer = lines.pop()  # incomplete or empty
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
        return rows


def render(progress: RunProgress, title: str) -> Group:
    total = progress.max_steps or 0
    done = min(progress.step, total) if total else progress.step
    width = 40
    filled = int(width * done / total) if total else 0
    bar = Text("━" * filled, style="green") + Text("━" * (width - filled), style="grey37")
    head = Text(f"{title}  ", style="bold") + bar + Text(f"  {done}/{total or '?'}")
    table = Table.grid(padding=(0, 2))
    for _ in range(4):
        table.add_column()
    cells = []
    for label, names, fmt in (
        ("loss", ("train/rm/loss", "train/sft/loss"), "{:.4f}"),
        ("accuracy", ("train/rm/accuracy", "train/sft/token_accuracy"), "{:.3f}"),
        ("lr", ("train/rm/lr", "train/sft/lr"), "{:.2e}"),
        ("grad norm", ("grad_norm",), "{:.3f}"),
        ("eval accuracy", ("eval/rm/accuracy",), "{:.3f}"),
        ("eval loss", ("eval/rm/loss", "eval/sft/loss"), "{:.4f}"),
        ("episode (pairs seen)", ("episode",), "{:,.0f}"),
        ("tokens seen", ("num_tokens",), "{:,.0f}"),
        ("samples/s", ("samples_per_second",), "{:.1f}"),
        ("peak memory", ("peak_memory_gb",), "{:.2f} GiB"),
    ):
        value = progress.first(*names)
        shown = "-" if value is None else fmt.format(value)
        step = progress.step_of(*names)
        if value is not None and label.startswith("eval") and step is not None and step != progress.step:
            shown += f" (step {step})"  # an evaluation is rarer than a step: say which step it is from
        cells.append((label, shown))
    eta = progress.eta_seconds()
    cells.append(("ETA", "-" if eta is None else format_seconds(eta)))
    for i in range(0, len(cells), 2):
        row = []
        for label, shown in cells[i : i + 2]:
            row += [Text(label, style="dim"), Text(shown)]
        while len(row) < 4:
            row.append(Text(""))
        table.add_row(*row)
    return Group(head, table)


class LiveView:
    """A rich Live display on a terminal; one plain line per logging step otherwise."""

    def __init__(self, metrics_path: Path, title: str, console: Console | None = None):
        self.console = console or make_console(stderr=True)
        self.follower = MetricsFollower(metrics_path)
        self.progress = RunProgress()
        self.title = title
        self.live: Live | None = None
        self.pending: int | None = None  # the step whose plain line waits for the step's other rows

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self.live = Live(render(self.progress, self.title), console=self.console, refresh_per_second=4)
            self.live.__enter__()
        return self

    def poll(self) -> None:
        for row in self.follower.new_rows():
            if row.get("event") == "stage":  # the child's work after training (rmspec.train.finish)
                self._flush()
                self.note(str(row.get("message", "")))
                continue
            if self.live is None and "step" in row and row.get("event") is None:
                # one line per step: a step's train and eval rows arrive apart, the line waits for both
                if self.pending is not None and (row["step"] != self.pending or "model_step" in row):
                    self._flush()
                self.pending = row["step"]
            self.progress.update(row)
            if "train/runtime" in row:  # the end of training: its last step is complete
                self._flush()
        if self.live is not None:
            self.live.update(render(self.progress, self.title))

    def _flush(self) -> None:
        if self.pending is not None and self.live is None:
            self.console.print(self.progress.line(), highlight=False)
        self.pending = None

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False)

    def __exit__(self, *exc) -> None:
        self.poll()
        self._flush()
        if self.live is not None:
            self.live.__exit__(*exc)
