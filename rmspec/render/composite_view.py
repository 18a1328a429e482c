"""The console summary of a composite run (a reward that trains nothing), as a trained run prints
its own: the reward's mean and spread on the validation rows, each component's mean, weight and
failures, and the benchmarks. Read from results.json only (rmspec.composite.run writes it).
Light: rich only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from rmspec.render.console import make_console


def _num(value: Any) -> str:
    return "-" if value is None else f"{float(value):.4f}"


def composite_tables(run: str, results: Mapping[str, Any]) -> list[Any]:
    validation = results.get("validation") or {}
    metrics = validation.get("metrics") or {}
    out: list[Any] = []
    head = Table(title=f"composite run completed: {run}", title_justify="left")
    head.add_column("validation")
    head.add_column("value", justify="right")
    if not validation:
        head.add_row("validation rows", "none (data.validation not set)")
    else:
        head.add_row("rows scored", f"{metrics.get('rows_scored', validation.get('rows', 0)):,}")
        head.add_row("rows failed", f"{metrics.get('rows_failed', 0):,}")
        if validation.get("rejected"):
            head.add_row("rows rejected (unreadable)", f"{validation['rejected']:,}")
        head.add_row("reward mean", _num(metrics.get("reward_mean")))
        head.add_row("reward std", _num(metrics.get("reward_std")))
    out.append(head)
    components = validation.get("components") or {}
    failures = ((validation.get("failures") or {}).get("components")) or {}
    if components:
        table = Table(title="components (validation rows)", title_justify="left")
        for column in ("component", "kind", "weight", "mean", "contribution", "scored", "failed"):
            table.add_column(column, justify="left" if column in ("component", "kind", "failed") else "right")
        kinds = (results.get("composite") or {}).get("components") or {}
        for name, figures in components.items():
            failed = (failures.get(name) or {}).get("failed") or {}
            table.add_row(
                name,
                str(kinds.get(name, "")),
                f"{figures.get('weight', 0):g}",
                _num(figures.get("mean")),
                _num(figures.get("contribution")),
                f"{(failures.get(name) or {}).get('scored', figures.get('rows', 0)):,}",
                ", ".join(f"{reason} {n:,}" for reason, n in failed.items()) or "0",
            )
        out.append(table)
    benchmarks = results.get("benchmarks") or {}
    if benchmarks:
        table = Table(title="Benchmarks (official scoring)", title_justify="left")
        for column in ("benchmark", "overall", "examples"):
            table.add_column(column, justify="left" if column == "benchmark" else "right")
        for name, entry in benchmarks.items():
            overall = entry.get("overall")
            table.add_row(
                name, "-" if overall is None else f"{100 * float(overall):.1f}%", f"{entry.get('num_examples', 0):,}"
            )
        out.append(table)
    return out


def print_composite_summary(run: str, results: Mapping[str, Any], console: Console | None = None) -> None:
    console = console or make_console()
    for table in composite_tables(run, results):
        console.print(table)
