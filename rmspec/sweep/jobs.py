"""A trial's run as a one-node SLURM job (sweep.slurm): a batch script that runs the same `rmspec run` the
local sweep would, submitted with sbatch, waited on through squeue, pruned with scancel.

The job writes the run directory as a local run does (it must be on a file system the nodes share): the
sweep follows RUN/metrics.jsonl for the pruner and reads RUN/status.json and results.json when the job has
left the queue. The script is DIR/jobs/NNN.slurm, its output appends to DIR/logs/NNN.log; the job id is a
user attribute of the trial (`slurm_jobs`), so a resumed sweep waits for a job still in the queue instead of
submitting the run again. Light: the SLURM client only.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rmspec.errors import RmspecError
from rmspec.launch.slurm import ALIVE, job_state, submit_environment
from rmspec.plan.slurm import CLUSTER_OPTIONS
from rmspec.rundir import RunDir
from rmspec.spec.hardware import SlurmSpec
from rmspec.sweep.trial import (
    POLL_SECONDS,
    MetricsFollower,
    Reporter,
    RunOutcome,
    RunRequest,
    outcome_of,
    prune_step,
    pruned_outcome,
)

STATE_EVERY = 2.0  # seconds between squeue calls: a shared controller prefers few


def job_script(
    request: RunRequest, name: str, slurm: SlurmSpec, gpus: int, cwd: Path, resume: bool, overwrite: bool
) -> str:
    """One node, one task: `rmspec run` of the trial there, from the folder the sweep runs in."""
    lines = [f"--job-name={name}", "--nodes=1", "--ntasks=1", f"--output={request.log}", "--open-mode=append"]
    # A requeued job would start `rmspec run SPEC` again on a directory that holds the run: the sweep's
    # --resume finishes an interrupted trial instead.
    lines.append("--no-requeue")
    if gpus:
        lines.append(f"--gpus-per-node={slurm.gpus_per_node or gpus}")
    lines += [f"{option}={getattr(slurm, key)}" for key, option in CLUSTER_OPTIONS.items() if getattr(slurm, key)]
    lines += list(slurm.extra)
    command = shlex.join([sys.executable, "-m", "rmspec", *request.command(resume, overwrite)[1:]])
    header = "".join(f"#SBATCH {line}\n" for line in lines)
    return (
        f"#!/bin/bash\n# Written by `rmspec sweep` for the run {request.run_dir}: one node, one `rmspec run`.\n"
        f"{header}set -euo pipefail\ncd {shlex.quote(str(cwd))}\nexport NO_COLOR=1\n"
        f'echo {shlex.quote("$ " + command)}"  (SLURM job $SLURM_JOB_ID on $SLURMD_NODENAME)"\nexec {command}\n'
    )


def submit(script: Path) -> str:
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60, env=submit_environment()
    )
    if done.returncode != 0:
        raise RmspecError(
            f"sbatch refused {script}: {done.stderr.strip() or done.stdout.strip()}",
            hint="fix sweep.slurm (partition, time, account), then `rmspec sweep --resume DIR`",
        )
    return done.stdout.strip().split(";")[0]


def cancel(job: str) -> None:
    subprocess.run(["scancel", job], capture_output=True, text=True, timeout=60)


def run_job(
    request: RunRequest,
    objective: str,
    report_metric: str | None,
    reporter: Reporter | None,
    *,
    name: str,
    slurm: SlurmSpec,
    gpus: int,
    script: Path,
    on_submit: Callable[[str], None],
    job: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
) -> RunOutcome:
    """Submit the run (or wait on `job`, already submitted), follow it until it leaves the queue."""
    began = time.monotonic()
    if job is None:
        script.parent.mkdir(parents=True, exist_ok=True)
        request.log.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(job_script(request, name, slurm, gpus, Path.cwd(), resume, overwrite), encoding="utf-8")
        job = submit(script)
        on_submit(job)
    follower = MetricsFollower(RunDir(request.run_dir), report_metric)
    pruned_at, asked = None, 0.0
    while True:
        now = time.monotonic()
        if now - asked >= STATE_EVERY:
            asked = now
            state = job_state(job)
            if state not in ALIVE:
                break
        time.sleep(POLL_SECONDS)
        if reporter is None or pruned_at is not None:
            continue
        pruned_at = prune_step(follower, reporter)
        if pruned_at is not None:
            cancel(job)
    seconds = time.monotonic() - began
    run = RunDir(request.run_dir)
    pruned = pruned_outcome(run, pruned_at, report_metric, seconds, follower.seen)
    if pruned is not None:
        return pruned
    code = 0 if state == "COMPLETED" else 1
    outcome = outcome_of(run, code, objective, seconds, follower.seen, request.log)
    if outcome.state == "failed" and state not in ("COMPLETED", ""):
        outcome.error = f"SLURM job {job} ended {state}: {outcome.error or ''}".rstrip(": ")
    return outcome
