"""What `rmspec plan` shows of a spec with a sweep: the budget before anything runs, in run time and wall time.

A trial is priced from everything its `rmspec run` does, not the training steps alone (issue 39: "10 s per
run" for trials of 136-173 s): the process start (Python, torch, accelerate, the data read and tokenised),
the model load, the training steps (max_steps when set, else the epochs), each validation pass (every
eval_steps and the final one), each benchmark, and the end (model, results, report). The steps come from the
spec's own plan (rmspec.plan.estimate); the fixed costs are this project's measurements (bench/results/
sweep_parallel.md), stated as such. The range of the per-run estimate over the space plans each bound and
choice alone (rmspec.spec.sweep_rules.sample_points). The wall time packs the trials: `parallel` at a time,
each on its own GPUs (as many trials as the host's GPUs hold) or its own slice of a CPU host's cores, or
`parallel` SLURM jobs. Light: planning only, no Optuna.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.plan import Plan, compile_plan
from rmspec.spec import LoadedSpec, load_spec
from rmspec.spec.sweep_rules import sample_points

# Measured on this project's 2-core machine (bench/results/sweep_parallel.md): `rmspec run` of a tiny model
# from start to results.json less its steps and evaluations: interpreter and imports of the parent, the
# accelerate launcher (before a one-process run started its trainer directly) and the trainer, data read,
# split and tokenised, report written.
START_SECONDS = 25.0
# Reading weights: a safetensors file from a local disk or page cache, per GB (fp32 on disk).
LOAD_SECONDS_PER_GB = 4.0
# A forward pass costs about a third of a training step's compute per example (2 of 6 FLOPs per parameter
# and token): evaluation is priced from the training step's estimate at that ratio.
FORWARD_SHARE = 1 / 3


def run_seconds(plan: Plan) -> float | None:
    """Training steps alone, as the plan estimates them (max_steps when set)."""
    estimate = plan.estimate
    per_step, steps = estimate.get("seconds_per_step"), estimate.get("total_steps")
    return float(per_step) * int(steps) if per_step is not None and steps is not None else None


def trial_estimate(spec: Any, plan: Plan) -> dict[str, Any]:
    """One run of a trial, part by part: {"seconds": total or None, "parts": {name: seconds}, "unpriced": [...]}."""
    estimate = plan.estimate
    parts: dict[str, float] = {"start": START_SECONDS}
    parts["model load"] = plan.model.num_parameters * 4 / 1e9 * LOAD_SECONDS_PER_GB
    train = run_seconds(plan)
    unpriced: list[str] = []
    if train is None:
        return {"seconds": None, "parts": parts, "unpriced": ["training steps (the plan has no time estimate)"]}
    parts["training steps"] = train
    per_example = float(estimate["seconds_per_step"]) / max(plan.global_batch_size, 1) * FORWARD_SHARE
    rows, train_rows = estimate.get("rows"), estimate.get("train_rows")
    validation_rows = rows - train_rows if rows is not None and train_rows is not None else None
    if spec.eval.validation or spec.training.eval_steps:
        steps = int(estimate.get("total_steps") or 0)
        passes = (steps // spec.training.eval_steps if spec.training.eval_steps else 0) + int(spec.eval.validation)
        if validation_rows is None:
            unpriced.append("validation (row count unknown)")
        elif passes:
            parts[f"validation ({passes} pass{'es' if passes > 1 else ''} of {validation_rows} rows)"] = (
                passes * validation_rows * per_example
            )
    for bench in spec.eval.benchmarks:
        count = bench.limit or _lines(bench.path, Path(plan.spec_path).parent)
        if count is None:
            unpriced.append(f"benchmark {bench.kind} (its size is not known here: a hub set, or a file not found)")
        else:
            parts[f"benchmark {bench.kind} ({count} rows)"] = count * per_example
    return {"seconds": sum(parts.values()), "parts": {k: round(v, 1) for k, v in parts.items()}, "unpriced": unpriced}


def _lines(path: str | None, base: Path) -> int | None:
    if not path:
        return None
    file = Path(path) if Path(path).is_absolute() else base / path
    try:
        with file.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


def packing(loaded: LoadedSpec, plan: Plan) -> dict[str, Any]:
    """How many trials run at once, on what, and what one trial gets."""
    from rmspec.sweep.devices import host_cores, host_gpus, trials_at_once

    sweep = loaded.spec.sweep
    assert sweep is not None
    if sweep.slurm is not None:
        return {
            "at_once": sweep.parallel,
            "where": f"{sweep.parallel} SLURM jobs at a time (one node each)",
            "share": 1,
        }
    if plan.uses_cpu:
        cores = host_cores()
        slice_size = max(1, len(cores) // sweep.parallel)
        where = f"{sweep.parallel} at once on this host's {len(cores)} cores, {slice_size} each"
        # the steps' compute scales with the cores a trial gets (the plan's estimate assumes all of them)
        return {"at_once": sweep.parallel, "where": where, "share": min(sweep.parallel, len(cores))}
    gpus = host_gpus()
    per_trial = plan.processes_per_node
    at_once = trials_at_once(sweep.parallel, len(gpus), per_trial) if gpus else sweep.parallel
    where = (
        f"{at_once} at once: {per_trial} of this host's {len(gpus)} GPUs each (CUDA_VISIBLE_DEVICES)"
        if gpus
        else f"{sweep.parallel} at once, {per_trial} GPU(s) each (no GPU seen here: the run host decides)"
    )
    return {"at_once": max(at_once, 1), "where": where, "share": 1}


def budget(loaded: LoadedSpec, sets: tuple[str, ...], plan: Plan) -> dict[str, Any]:
    sweep = loaded.spec.sweep
    assert sweep is not None
    seeds = len(sweep.seeds or [None])
    trial = trial_estimate(loaded.spec, plan)
    per_run = trial["seconds"]
    points: list[dict[str, Any]] = []
    for label, values in sample_points(sweep):
        extra = ["sweep=null", *(f"{path}={json.dumps(value)}" for path, value in values.items())]
        try:
            point_loaded = load_spec(loaded.file, (*sets, *extra))
            point = compile_plan(point_loaded, sets=[*sets, *extra])
        except RmspecError as exc:
            points.append({"point": label, "seconds": None, "error": exc.message.splitlines()[0]})
            continue
        points.append({"point": label, "seconds": trial_estimate(point_loaded.spec, point)["seconds"]})
    timed = [p["seconds"] for p in points if p["seconds"] is not None]
    low, high = (min(timed), max(timed)) if timed else (per_run, per_run)
    runs = sweep.trials * seeds
    packed = packing(loaded, plan)
    wall = None
    if per_run is not None:
        # compute stretched by the share of cores, the fixed costs not: what running trials together saves
        steps = run_seconds(plan) or 0.0
        per_run_packed = per_run + steps * (packed["share"] - 1)
        wall = math.ceil(sweep.trials / packed["at_once"]) * seeds * per_run_packed
    return {
        "trials": sweep.trials,
        "seeds": seeds,
        "runs": runs,
        "per_run_seconds": per_run,
        "per_run_parts": trial["parts"],
        "unpriced": trial["unpriced"],
        "total_seconds": None if per_run is None else runs * per_run,
        "wall_seconds": wall,
        "packing": packed,
        "range_seconds": [low, high],
        "range_total_seconds": None if low is None or high is None else [runs * low, runs * high],
        "points": points,
        "timeout": sweep.timeout,
    }


def render_budget(loaded: LoadedSpec, sets: tuple[str, ...], plan: Plan) -> None:
    from rich.console import Console
    from rich.table import Table

    found = budget(loaded, sets, plan)
    console = Console()
    per_run = found["per_run_seconds"]
    console.print(
        f"\n[bold]sweep budget[/bold]: {found['trials']} trials x {found['seeds']} seed(s) = {found['runs']} runs "
        f"x {_time(per_run)} per run (the spec's own values) = {_time(found['total_seconds'])} of run time"
        + (f"; the timeout stops new trials after {_time(found['timeout'])}" if found["timeout"] else "")
    )
    parts = ", ".join(f"{name} {_time(seconds)}" for name, seconds in found["per_run_parts"].items())
    console.print(f"a run: {parts}" + (f"; not priced: {', '.join(found['unpriced'])}" if found["unpriced"] else ""))
    console.print(f"packing: {found['packing']['where']}; wall time about {_time(found['wall_seconds'])}")
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
    console.print(
        "time: the plan's step estimate plus measured fixed costs (start, load, evaluation); pruned trials stop "
        "early; after a sweep, sweep.json gives each trial's estimated_seconds against its measured seconds"
    )


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
