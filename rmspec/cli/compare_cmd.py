"""`rmspec compare RUN_OR_SWEEP ... [--json]`: runs side by side (rmspec.sweep.compare reads them)."""

from __future__ import annotations

import json
from typing import Any

import click


@click.command()
@click.argument("targets", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (for scripts).")
def compare(targets: tuple[str, ...], as_json: bool) -> None:
    """Compare runs: the spec keys that differ, validation and benchmark metrics, time and tokens.

    A sweep directory stands for all its trials. Runs that differ only by training.seed are also
    summarised as mean ± standard error.
    """
    from rmspec.sweep.compare import comparison

    found = comparison(list(targets))
    if as_json:
        click.echo(json.dumps(found, indent=2, default=str))
        return
    _print(found)


def _print(found: dict[str, Any]) -> None:
    from rich.table import Table

    from rmspec.render.console import make_console

    runs = found["runs"]
    table = Table(title=f"{len(runs)} runs", show_lines=False)
    table.add_column("", no_wrap=True)
    for run in runs:
        # fold, never "...": the column that differs is the one a reader came to see
        table.add_column(_short(run["run"]), justify="right", overflow="fold")
    if found["differences"]:
        table.add_row("[bold]spec differences[/bold]", *[""] * len(runs))
    for key in found["differences"]:
        table.add_row(key, *[_fmt(run["spec"].get(key)) for run in runs])
    table.add_row("[bold]metrics[/bold]", *[""] * len(runs))
    for key in sorted({k for run in runs for k in run["metrics"]}):
        table.add_row(key, *[_fmt(run["metrics"].get(key)) for run in runs])
    table.add_row("training time (s)", *[_fmt(run["train_seconds"]) for run in runs])
    table.add_row("tokens", *[_fmt(run["tokens"]) for run in runs])
    table.add_row("steps", *[_fmt(run["steps"]) for run in runs])
    table.add_row("state", *[_fmt(run["state"]) for run in runs])
    console = make_console()
    console.print(table)
    for group in found["seed_groups"]:
        seeds = Table(title=f"differ only by seed: {', '.join(_short(r) for r in group['runs'])}")
        seeds.add_column("metric")
        seeds.add_column("mean ± s.e.", justify="right")
        seeds.add_column("n", justify="right")
        for key, value in group["metrics"].items():
            seeds.add_row(key, f"{value['mean']:.4f} ± {value['stderr']:.4f}", str(value["n"]))
        console.print(seeds)


def _short(path: str) -> str:
    parts = path.rstrip("/").split("/")
    return "/".join(parts[-2:]) if parts[-1].startswith("seed-") or parts[-2:-1] == ["trials"] else parts[-1]


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return str(value)
