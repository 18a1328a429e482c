"""The sweep loop: Optuna ask/tell in this process, one ordinary run per trial and seed, resumable.

The study lives in DIR/study.db (SQLite), so a sweep killed at any point resumes from it: finished trials
stay as they are, a trial left running is finished from its run directory (read if it completed while
the sweep was down, resumed from its last checkpoint, or re-run, said so), and the loop goes on to the
budget. DIR/.claim.lock (rmspec.rundir.lock) keeps a second sweep out of the directory.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from rmspec.errors import RmspecError
from rmspec.rundir import RunDir, atomic_write_json, last_complete_checkpoint, read_json, read_status
from rmspec.rundir.lock import RunLocked, claim_lock, held_by, trainer_owner
from rmspec.spec import LoadedSpec, load_spec
from rmspec.spec.sweep import SweepSpec
from rmspec.spec.sweep_rules import pruner_metric
from rmspec.sweep import space
from rmspec.sweep.layout import SweepDir
from rmspec.sweep.live import SweepView
from rmspec.sweep.trial import RunOutcome, RunRequest, check_request, outcome_of, run_once, trial_sets

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)


@dataclass
class Sweep:
    """One sweep: its spec, its directory, its study."""

    loaded: LoadedSpec
    sets: tuple[str, ...]
    dir: SweepDir
    study: optuna.Study
    view: SweepView

    @property
    def spec(self) -> SweepSpec:
        sweep = self.loaded.spec.sweep
        assert sweep is not None  # checked when the sweep opened
        return sweep

    @property
    def seeds(self) -> list[int | None]:
        return list(self.spec.seeds) if self.spec.seeds else [None]


def start(spec_file: str, sets: tuple[str, ...], out: str | None) -> tuple[Sweep, Any]:
    loaded = load_spec(spec_file, sets)
    sweep = loaded.spec.sweep
    if sweep is None:
        raise RmspecError(
            f"{spec_file} has no sweep: section", hint="add one (`rmspec schema` lists the sweep section's fields), or train it with `rmspec run`"
        )
    check_objective(loaded)
    root = Path(out or sweep.dir.format(name=loaded.spec.name))
    folder = SweepDir(root)
    lock = _claim(folder)
    if folder.is_sweep():
        lock.release()
        raise RmspecError(f"{root} already holds a sweep", hint=f"continue it with `rmspec sweep --resume {root}`")
    atomic_write_json(
        folder.sweep_json,
        {
            "spec_path": str(Path(spec_file).resolve()),
            "sets": list(sets),
            "spec_hash": loaded.spec_hash,
            "study_name": loaded.spec.name,
            "storage": folder.storage_url,
        },
    )
    study = _study(folder, loaded, create=True)
    for values in sweep.first_trials:
        study.enqueue_trial(values)
    return Sweep(loaded, sets, folder, study, SweepView(loaded.spec.name, sweep)), lock


def resume(root: str) -> tuple[Sweep, Any]:
    folder = SweepDir(Path(root))
    if not folder.is_sweep():
        raise RmspecError(f"{root} holds no sweep (no study.db)", hint="give the directory rmspec sweep wrote (-o)")
    lock = _claim(folder)
    try:
        record = read_json(folder.sweep_json)
        loaded = load_spec(record["spec_path"], tuple(record.get("sets") or ()))
        if loaded.spec_hash != record.get("spec_hash"):
            raise RmspecError(
                f"{record['spec_path']} changed since the sweep started: its trials would not be comparable",
                hint="restore the spec, or start a new sweep in another directory (-o)",
            )
        study = _study(folder, loaded, create=False)
    except BaseException:
        lock.release()
        raise
    sweep = loaded.spec.sweep
    assert sweep is not None
    return Sweep(loaded, tuple(record.get("sets") or ()), folder, study, SweepView(loaded.spec.name, sweep)), lock


def check_objective(loaded: LoadedSpec) -> None:
    """validation.metrics.NAME must be a metric the approach's evaluation writes (its registry entry)."""
    from rmspec import approaches

    sweep = loaded.spec.sweep
    assert sweep is not None
    parts = sweep.objective.metric.split(".")
    if parts[:2] != ["validation", "metrics"]:
        return
    names = approaches.of(loaded.spec).validation_metric_names(loaded.spec.approach)
    if len(parts) != 3 or parts[2] not in names:
        raise RmspecError(
            f"sweep.objective.metric {sweep.objective.metric!r}: approach {loaded.spec.approach.kind}'s validation "
            f"writes metrics {', '.join(names) or '(none)'}",
            hint=f"use one of: {', '.join(f'validation.metrics.{n}' for n in names) or 'validation.overall'}",
        )


def _claim(folder: SweepDir):
    try:
        return claim_lock(folder.root, "rmspec sweep")
    except RunLocked as exc:
        raise RunLocked(
            exc.message.replace("one run directory", "one sweep directory"),
            hint=f"wait for it to end, or stop it and then `rmspec sweep --resume {folder.root}`",
        ) from None


def _study(folder: SweepDir, loaded: LoadedSpec, create: bool) -> optuna.Study:
    sweep = loaded.spec.sweep
    assert sweep is not None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage, sampler, pruner = folder.storage_url, space.sampler_of(sweep), space.pruner_of(sweep)
    name = loaded.spec.name
    if create:
        direction = sweep.objective.direction
        return optuna.create_study(
            study_name=name, storage=storage, sampler=sampler, pruner=pruner, direction=direction
        )
    return optuna.load_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner)


# ------------------------------------------------------------------ the loop


def run_sweep(sweep: Sweep) -> None:
    """Finish the trials left running, then ask/tell to the budget (trials, timeout, or the grid's end)."""
    from rmspec.sweep.outputs import write_sweep_json

    began = time.monotonic()
    with sweep.view:
        for frozen in sweep.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            _finish_interrupted(sweep, frozen)
            write_sweep_json(sweep)
        while _finished(sweep) < _budget(sweep):
            if sweep.spec.timeout is not None and time.monotonic() - began > sweep.spec.timeout:
                sweep.view.note(f"timeout: {sweep.spec.timeout:g} s passed, no new trial starts")
                break
            trial = sweep.study.ask()
            params = space.suggest(trial, sweep.spec)
            values = space.values_of(sweep.spec, params)
            trial.set_user_attr("values", values)
            _run_trial(sweep, trial, values)
            write_sweep_json(sweep)


def _finished(sweep: Sweep) -> int:
    return len(sweep.study.get_trials(deepcopy=False, states=FINISHED))


def _budget(sweep: Sweep) -> int:
    if sweep.spec.sampler.kind == "grid":
        return min(sweep.spec.trials, math.prod(len(v) for v in space.grid_points(sweep.spec).values()))
    return sweep.spec.trials


def _run_trial(sweep: Sweep, trial: optuna.Trial, values: dict[str, Any]) -> None:
    number = trial.number
    metric = pruner_metric(sweep.loaded.spec) if sweep.spec.pruner.kind != "none" else None
    sign = 1.0 if metric is None or space.direction_of(metric) == sweep.spec.objective.direction else -1.0
    requests = _requests(sweep, number, values)
    trial.set_user_attr("run_dirs", [str(r.run_dir) for r in requests])
    trial.set_user_attr("command", " ".join(requests[0].command()))
    sweep.view.started(number, values)
    outcomes: list[RunOutcome] = []
    for i, request in enumerate(requests):
        error = check_request(request)
        if error:
            outcomes.append(RunOutcome("failed", error=error))
            break

        def reporter(step: int, value: float) -> bool:
            trial.report(sign * value, step)
            return trial.should_prune()

        first = i == 0 and metric is not None
        outcomes.append(run_once(request, sweep.spec.objective.metric, metric, reporter if first else None))
        if outcomes[-1].state != "completed":
            break
    _tell(sweep, number, trial, outcomes)


def _requests(sweep: Sweep, number: int, values: dict[str, Any]) -> list[RunRequest]:
    several = len(sweep.seeds) > 1
    out = []
    for seed in sweep.seeds:
        run_dir = sweep.dir.run_dir(number, seed or 0, several)
        name = f"{sweep.loaded.spec.name}-t{number:03d}" + (f"-s{seed}" if several else "")
        sets = trial_sets(sweep.sets, name, run_dir, seed, values)
        out.append(RunRequest(sweep.loaded.file.resolve(), sets, run_dir, sweep.dir.log(number, seed or 0, several)))
    return out


def _tell(sweep: Sweep, number: int, trial: optuna.Trial, outcomes: list[RunOutcome]) -> None:
    last = outcomes[-1]
    trial.set_user_attr("seconds", round(sum(o.seconds for o in outcomes), 2))
    if last.state == "interrupted":
        sweep.view.note(f"trial {number} interrupted: resume with `rmspec sweep --resume {sweep.dir.root}`")
        raise KeyboardInterrupt
    if last.state == "pruned":
        trial.set_user_attr("pruned_at_step", last.pruned_at)
        sweep.study.tell(number, state=optuna.trial.TrialState.PRUNED)
        sweep.view.finished(number, "pruned", None, f"at step {last.pruned_at}")
        return
    if last.state == "failed":
        trial.set_user_attr("error", (last.error or "")[-2000:])
        sweep.study.tell(number, state=optuna.trial.TrialState.FAIL)
        sweep.view.finished(number, "failed", None, _last_line(last.error))
        return
    seed_values = [o.value for o in outcomes if o.value is not None]
    value = statistics.fmean(seed_values)
    if len(seed_values) > 1:
        trial.set_user_attr("seed_values", seed_values)
        trial.set_user_attr("stderr", statistics.stdev(seed_values) / math.sqrt(len(seed_values)))
    sweep.study.tell(number, value)
    sweep.view.finished(number, "completed", value, "")


def _finish_interrupted(sweep: Sweep, frozen: optuna.trial.FrozenTrial) -> None:
    """A trial the sweep was running when it stopped: read, resume or re-run each of its runs."""
    values = frozen.user_attrs.get("values", {})
    # Optuna's handle on a stored trial (its id is the storage's key); attributes and tell go through it.
    trial = optuna.trial.Trial(sweep.study, frozen._trial_id)
    number = frozen.number
    sweep.view.started(number, values)
    outcomes = []
    for request in _requests(sweep, number, values):
        _wait_for_owner(sweep, number, request.run_dir)
        run = RunDir(request.run_dir)
        status = read_status(run)
        if status.state == "completed":
            sweep.view.note(f"trial {number}: {run.root} completed while the sweep was stopped; read as it is")
            outcomes.append(outcome_of(run, 0, sweep.spec.objective.metric, 0.0, [], request.log))
        elif status.state == "pruned":
            outcomes.append(RunOutcome("pruned", pruned_at=status.step))
        elif run.plan.exists() and last_complete_checkpoint(run.checkpoints, remove_partial=False):
            sweep.view.note(f"trial {number}: resuming {run.root} from its last checkpoint")
            outcomes.append(run_once(request, sweep.spec.objective.metric, None, None, resume=True))
        else:
            sweep.view.note(f"trial {number}: no checkpoint in {run.root}; re-running it from the start")
            error = check_request(request)
            outcome = (
                RunOutcome("failed", error=error)
                if error
                else run_once(request, sweep.spec.objective.metric, None, None, overwrite=True)
            )
            outcomes.append(outcome)
        if outcomes[-1].state != "completed":
            break
    _tell(sweep, number, trial, outcomes)


def _wait_for_owner(sweep: Sweep, number: int, run_dir: Path) -> None:
    """A trainer (or `rmspec run`) the killed sweep left behind still owns the run: let it end first."""
    said = False
    while (owner := held_by(RunDir(run_dir).claim_lock) or trainer_owner(run_dir)) is not None:
        if not said:
            sweep.view.note(f"trial {number}: waiting for pid {owner.get('pid', '?')}, still running {run_dir}")
            said = True
        time.sleep(0.5)


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def exit_interrupted(sweep: Sweep) -> None:
    print(f"sweep interrupted; resume with: rmspec sweep --resume {sweep.dir.root}", file=sys.stderr)
    sys.exit(130)
