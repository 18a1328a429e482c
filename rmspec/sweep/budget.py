"""What `rmspec plan` shows of a spec with a sweep: the budget before anything runs.

trials x seeds x the per-run estimate of the spec's own plan, and the range of the per-run estimate over
the space: each bound and choice planned alone (rmspec.spec.sweep_rules.sample_points), so a key that
changes the cost (batch size, max_length, max_steps) shows how much. Light: planning only, no Optuna.
"""

from __future__ import annotations

import json
from typing import Any

from rmspec.errors import RmspecError
from rmspec.plan import Plan, compile_plan
from rmspec.spec import LoadedSpec, load_spec
from rmspec.spec.sweep_rules import sample_points


def run_seconds(plan: Plan) -> float | None:
    estimate = plan.estimate
    per_step, steps = estimate.get("seconds_per_step"), estimate.get("total_steps")
    return float(per_step) * int(steps) if per_step is not None and steps is not None else None


def budget(loaded: LoadedSpec, sets: tuple[str, ...], plan: Plan) -> dict[str, Any]:
    sweep = loaded.spec.sweep
    assert sweep is not None
    seeds = len(sweep.seeds or [None])
    per_run = run_seconds(plan)
    points: list[dict[str, Any]] = []
    for label, values in sample_points(sweep):
        extra = ["sweep=null", *(f"{path}={json.dumps(value)}" for path, value in values.items())]
        try:
            point = compile_plan(load_spec(loaded.file, (*sets, *extra)), sets=[*sets, *extra])
        except RmspecError as exc:
            points.append({"point": label, "seconds": None, "error": exc.message.splitlines()[0]})
            continue
        points.append({"point": label, "seconds": run_seconds(point)})
    timed = [p["seconds"] for p in points if p["seconds"] is not None]
    low, high = (min(timed), max(timed)) if timed else (per_run, per_run)
    runs = sweep.trials * seeds
    return {
        "trials": sweep.trials,
        "seeds": seeds,
        "runs": runs,
        "per_run_seconds": per_run,
        "total_seconds": None if per_run is None else runs * per_run,
        "range_seconds": [low, high],
        "range_total_seconds": None if low is None or high is None else [runs * low, runs * high],
        "points": points,
        "timeout": sweep.timeout,
    }


def render_budget(loaded: LoadedSpec, sets: tuple[str, ...], plan: Plan) -> None:
    from rich.table import Table

    from rmspec.render.console import make_console

    found = budget(loaded, sets, plan)
    console = make_console()
    per_run = found["per_run_seconds"]
    console.print(
        f"\n[bold]sweep budget[/bold]: {found['trials']} trials x {found['seeds']} seed(s) = {found['runs']} runs "
        f"x {_time(per_run)} per run (the spec's own values) = {_time(found['total_seconds'])}"
        + (f"; the timeout stops new trials after {_time(found['timeout'])}" if found["timeout"] else "")
    )
    low, high = found["range_seconds"]
    if low is not None and high is not None and abs(high - low) > 1e-9:
        lo, hi = found["range_total_seconds"]
        console.print(f"over the space a run takes {_time(low)} to {_time(high)}: the sweep {_time(lo)} to {_time(hi)}")
    table = Table(title="per-run estimate at each bound and choice (planned alone)")
    table.add_column("point")
    table.add_column("per run", justify="right")
    for point in found["points"]:
        shown = _time(point["seconds"]) if point["seconds"] is not None else point.get("error")
        table.add_row(point["point"], shown or "? (the plan has no time estimate: see its note)")
    console.print(table)
    console.print("time: compute only, as the plan above estimates it; pruned trials stop early")


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
