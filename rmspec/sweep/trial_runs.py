"""One trial, start to tell: its values from the study, each seed's run, the outcome told.

Each seed's run directory is taken as it is found: waited for while its `rmspec run`, trainer or job still
lives (a sweep killed and resumed), read if it completed, resumed from its last checkpoint, or (re-)run from
the start, each said so on the console.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

import optuna

from rmspec.rundir import RunDir, last_complete_checkpoint, read_status
from rmspec.rundir.lock import Lock
from rmspec.spec.sweep_rules import pruner_metric
from rmspec.sweep import outputs, space
from rmspec.sweep.launching import launch
from rmspec.sweep.owners import live_owner
from rmspec.sweep.state import Sweep
from rmspec.sweep.trial import RunOutcome, RunRequest, outcome_of, trial_sets
from rmspec.sweep.workers import IDLE_SECONDS, Workers


def work(sweep: Sweep, workers: Workers, trial: optuna.Trial, lock: Lock, adopted: bool) -> None:
    """One trial, start to tell: its values from the study, each seed's run, the outcome told."""
    number = trial.number
    try:
        with sweep.guard:
            # The trial's values always come from its stored parameters: Optuna's suggest returns a parameter
            # the trial already holds (a trial stopped after its suggestion resumes with it), and samples the rest.
            values = space.values_of(sweep.spec, space.suggest(trial, sweep.spec))
            trial.set_user_attr("values", values)
            sweep.view.started(number, values)
        outcomes = _runs(sweep, workers, trial, values, adopted)
        if outcomes and outcomes[-1].state == "interrupted":
            with workers.lock:
                workers.interrupted.append(number)
            workers.stopping.set()  # a run told to stop (Ctrl-C, scancel) stops the sweep, resumable
            sweep.view.note(f"trial {number} interrupted: resume with `rmspec sweep --resume {sweep.dir.root}`")
            return
        _tell(sweep, trial, outcomes)
        outputs.write_sweep_json(sweep)
    finally:
        lock.release()


def _runs(sweep: Sweep, workers: Workers, trial: optuna.Trial, values: dict, adopted: bool) -> list[RunOutcome]:
    number = trial.number
    metric = pruner_metric(sweep.loaded.spec) if sweep.spec.pruner.kind != "none" else None
    sign = 1.0 if metric is None or space.direction_of(metric) == sweep.spec.objective.direction else -1.0
    requests = _requests(sweep, number, values)
    jobs: dict[str, str] = dict(trial.user_attrs.get("slurm_jobs") or {}) if adopted else {}
    with sweep.guard:
        trial.set_user_attr("run_dirs", [str(r.run_dir) for r in requests])
        trial.set_user_attr("command", " ".join(requests[0].command()))

    def reporter(step: int, value: float) -> bool:
        with sweep.guard:
            trial.report(sign * value, step)
            return trial.should_prune()

    outcomes: list[RunOutcome] = []
    for i, request in enumerate(requests):
        if workers.stopping.is_set():
            outcomes.append(RunOutcome("interrupted"))
            break
        job = jobs.get(str(request.run_dir))
        owner = live_owner(request.run_dir, job)
        if owner is not None:
            sweep.view.note(f"trial {number}: {request.run_dir} is still run by {owner}; waiting for it to end")
            _wait_for_owner(request.run_dir, job)
        run = RunDir(request.run_dir)
        status = read_status(run)
        report = reporter if i == 0 and metric is not None else None
        if status.state == "completed":
            sweep.view.note(f"trial {number}: {run.root} completed while no sweep followed it; read as it is")
            outcomes.append(outcome_of(run, 0, sweep.spec.objective.metric, 0.0, [], request.log))
        elif status.state == "pruned":
            outcomes.append(RunOutcome("pruned", pruned_at=status.step))
        elif run.plan.exists() and last_complete_checkpoint(run.checkpoints, remove_partial=False):
            sweep.view.note(f"trial {number}: resuming {run.root} from its last checkpoint")
            outcomes.append(launch(sweep, workers, trial, request, None, resume=True, jobs=jobs))
        else:
            if run.root.exists() and adopted:
                sweep.view.note(f"trial {number}: no checkpoint in {run.root}; re-running it from the start")
            outcomes.append(launch(sweep, workers, trial, request, report, overwrite=run.root.exists(), jobs=jobs))
        if outcomes[-1].state != "completed":
            break
    return outcomes


def _requests(sweep: Sweep, number: int, values: dict[str, Any]) -> list[RunRequest]:
    several = len(sweep.seeds) > 1
    out = []
    for seed in sweep.seeds:
        run_dir = sweep.dir.run_dir(number, seed or 0, several)
        name = f"{sweep.loaded.spec.name}-t{number:03d}" + (f"-s{seed}" if several else "")
        sets = trial_sets(sweep.sets, name, run_dir, seed, values)
        out.append(RunRequest(sweep.loaded.file.resolve(), sets, run_dir, sweep.dir.log(number, seed or 0, several)))
    return out


def _tell(sweep: Sweep, trial: optuna.Trial, outcomes: list[RunOutcome]) -> None:
    number = trial.number
    last = outcomes[-1]
    with sweep.guard:
        trial.set_user_attr("seconds", round(sum(o.seconds for o in outcomes), 2))
        if last.state == "pruned":
            trial.set_user_attr("pruned_at_step", last.pruned_at)
            sweep.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            sweep.view.finished(number, "pruned", None, f"at step {last.pruned_at}")
            return
        if last.state == "failed":
            trial.set_user_attr("error", (last.error or "")[-2000:])
            sweep.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            sweep.view.finished(number, "failed", None, _last_line(last.error))
            return
        seed_values = [o.value for o in outcomes if o.value is not None]
        value = statistics.fmean(seed_values)
        if len(seed_values) > 1:
            trial.set_user_attr("seed_values", seed_values)
            trial.set_user_attr("stderr", statistics.stdev(seed_values) / math.sqrt(len(seed_values)))
        sweep.study.tell(trial, value)
        sweep.view.finished(number, "completed", value, "")


def _wait_for_owner(run_dir: Path, job: str | None) -> None:
    """A `rmspec run`, trainer or job the stopped sweep left behind still owns the run: let it end first,
    then read what it really did (completed, interrupted with a checkpoint, failed)."""
    while live_owner(run_dir, job) is not None:
        time.sleep(IDLE_SECONDS)


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
