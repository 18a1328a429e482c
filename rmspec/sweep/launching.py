"""Launching one run of a trial: plan it (a combination that does not plan fails the trial at once), then run
it as a one-node SLURM job (sweep.slurm) or here, with the devices the pool grants it (sweep.parallel)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from rmspec.spec.sweep_rules import pruner_metric
from rmspec.sweep.budget import trial_estimate
from rmspec.sweep.devices import Grant
from rmspec.sweep.state import Sweep
from rmspec.sweep.trial import RunOutcome, RunRequest, Start, check_request, run_once
from rmspec.sweep.workers import Workers

if TYPE_CHECKING:
    import optuna


def launch(
    sweep: Sweep,
    workers: Workers,
    trial: optuna.Trial,
    request: RunRequest,
    reporter: Any,
    *,
    jobs: dict[str, str],
    resume: bool = False,
    overwrite: bool = False,
) -> RunOutcome:
    """Plan the run (a combination that does not plan fails the trial at once), then run it here or as a job."""
    number = trial.number
    error, planned = check_request(request)
    if error:
        return RunOutcome("failed", error=error)
    loaded, plan = planned
    estimate = trial_estimate(loaded.spec, plan)["seconds"]
    with sweep.guard:
        if estimate is not None and "estimated_seconds" not in trial.user_attrs:
            trial.set_user_attr("estimated_seconds", round(estimate * len(sweep.seeds), 1))
    gpus = 0 if plan.uses_cpu else plan.processes_per_node
    objective = sweep.spec.objective.metric
    metric = pruner_metric(sweep.loaded.spec) if reporter is not None else None
    if sweep.spec.slurm is not None:
        from rmspec.sweep.jobs import run_job

        def submitted(job: str) -> None:
            jobs[str(request.run_dir)] = job
            with workers.lock:
                workers.jobs[number] = job
            with sweep.guard:
                trial.set_user_attr("slurm_jobs", dict(jobs))
            sweep.view.note(f"trial {number}: SLURM job {job} for {request.run_dir}")

        several = len(sweep.seeds) > 1
        seed = request.run_dir.name.removeprefix("seed-") if several else "0"
        try:
            return run_job(
                request,
                objective,
                metric,
                reporter,
                name=f"{sweep.loaded.spec.name}-t{number:03d}" + (f"-s{seed}" if several else ""),
                slurm=sweep.spec.slurm,
                gpus=gpus,
                script=sweep.dir.job_script(number, int(seed) if seed.isdigit() else 0, several),
                on_submit=submitted,
                resume=resume,
                overwrite=overwrite,
            )
        finally:
            with workers.lock:
                workers.jobs.pop(number, None)
    grant = Grant()
    if workers.pool is not None:
        try:
            grant = workers.pool.take(gpus)
        except ValueError as exc:
            return RunOutcome("failed", error=str(exc))
    if grant.describe():
        sweep.view.note(f"trial {number}: {grant.describe()}")
        with sweep.guard:
            trial.set_user_attr("devices", grant.describe())

    def started(child: subprocess.Popen) -> None:
        with workers.lock:
            workers.children[number] = child

    try:
        start_with = Start(env=grant.environment(plan.processes_per_node), cores=grant.cores, on_start=started)
        return run_once(request, objective, metric, reporter, resume=resume, overwrite=overwrite, start=start_with)
    finally:
        with workers.lock:
            workers.children.pop(number, None)
        if workers.pool is not None:
            workers.pool.give_back(grant)
