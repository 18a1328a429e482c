"""The live table of a sweep: trial, parameters, state, objective and best so far.

On a terminal it is redrawn in place (rich Live); into a file or pipe each trial prints one line when it
starts and one when it ends, so that a log reads in order.
"""

from __future__ import annotations

from typing import Any

from rich.live import Live
from rich.table import Table

from rmspec.render.console import make_console
from rmspec.spec.sweep import SweepSpec


class SweepView:
    def __init__(self, name: str, sweep: SweepSpec):
        self.name = name
        self.maximize = sweep.objective.direction == "maximize"
        self.metric = sweep.objective.metric
        self.rows: dict[int, list[Any]] = {}
        self.best: float | None = None
        self.console = make_console()
        self.live: Live | None = None

    def __enter__(self) -> SweepView:
        if self.console.is_terminal:
            self.live = Live(self._table(), console=self.console, refresh_per_second=2)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
            self.live = None

    def started(self, number: int, values: dict[str, Any]) -> None:
        self.rows[number] = [_params(values), "running", None, ""]
        self._show(f"trial {number}: running  {_params(values)}")

    def finished(self, number: int, state: str, value: float | None, note: str) -> None:
        row = self.rows.setdefault(number, ["", state, None, ""])
        row[1:] = [state, value, note]
        if value is not None and (self.best is None or (value > self.best) == self.maximize and value != self.best):
            self.best = value
        shown = "-" if value is None else f"{value:.4f}"
        best = "-" if self.best is None else f"{self.best:.4f}"
        self._show(f"trial {number}: {state}  {self.metric} {shown}  best {best}  {note}".rstrip())

    def note(self, text: str) -> None:
        if self.live is not None:
            self.live.console.print(text)
        else:
            self.console.print(text, highlight=False, soft_wrap=True)

    def _show(self, line: str) -> None:
        if self.live is not None:
            self.live.update(self._table())
        else:
            self.console.print(line, highlight=False, soft_wrap=True)

    def _table(self) -> Table:
        table = Table(title=f"sweep {self.name}: {self.metric} ({'max' if self.maximize else 'min'})")
        for column in ("trial", "parameters", "state", "objective", "best so far", "note"):
            table.add_column(column, justify="right" if column in ("trial", "objective", "best so far") else "left")
        best: float | None = None
        for number, (params, state, value, note) in sorted(self.rows.items()):
            if value is not None and (best is None or (value > best) == self.maximize):
                best = value
            table.add_row(
                str(number),
                params,
                state,
                "-" if value is None else f"{value:.4f}",
                "-" if best is None else f"{best:.4f}",
                note,
            )
        return table


def _params(values: dict[str, Any]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={_short(v)}" for k, v in values.items())


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
