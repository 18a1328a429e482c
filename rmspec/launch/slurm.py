"""Several nodes through SLURM: submit the run's launch.slurm, follow the job, ask for its state.

The job writes the run directory (on a filesystem every node shares) exactly as a local run
does, so following it is following RUN/status.json and RUN/metrics.jsonl, plus the job's state
from squeue (then scontrol, then sacct once the job has left the queue). Light (no torch).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rmspec.errors import RmspecError, RunError
from rmspec.plan import Plan
from rmspec.rundir import RunDir, update_status

# Job states in which the job still owns its run directory (squeue's long names).
ALIVE = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "STOPPED",
        "SIGNALING",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "STAGE_OUT",
        "RESV_DEL_HOLD",
        "SPECIAL_EXIT",
    }
)


def _run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def job_state(job_id: str) -> str:
    """The job's state ('RUNNING', 'COMPLETED', ...), '' when no SLURM command knows it."""
    done = _run(["squeue", "-h", "-j", str(job_id), "-o", "%T"])
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return done.stdout.split()[0]
    done = _run(["scontrol", "show", "job", "-o", str(job_id)])  # finished jobs stay for MinJobAge
    if done is not None and done.returncode == 0:
        match = re.search(r"\bJobState=(\S+)", done.stdout)
        if match:
            return match.group(1)
    done = _run(["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State"])  # with accounting only
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return done.stdout.split()[0].split()[0]
    return ""


def submit_environment() -> dict[str, str]:
    """The submitter's environment (sbatch exports it to the job), with this Python's folder first on
    PATH so the job's `accelerate` is the one installed beside this rmspec, activated or not."""
    env = dict(os.environ)
    here = str(Path(sys.executable).parent)
    if here not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = here + os.pathsep + env.get("PATH", "")
    return env


def submit(run_dir: RunDir, plan: Plan) -> str:
    """sbatch the run's launch.slurm unchanged; records the job id in RUN/status.json."""
    script = run_dir.root / "launch.slurm"
    if shutil.which("sbatch") is None:
        raise RmspecError(
            "sbatch is not on PATH: --submit needs a SLURM client (a login node of the cluster)",
            hint=f"submit it where SLURM is: sbatch {script}",
        )
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60, env=submit_environment()
    )
    if done.returncode != 0:
        raise RunError(
            f"sbatch refused {script}: {done.stderr.strip() or done.stdout.strip()}",
            hint=f"fix the cause (partition, node count, account), then `rmspec run --submit --resume {run_dir.root}`",
        )
    job = done.stdout.strip().split(";")[0]
    update_status(run_dir, state="submitted", slurm_job_id=job, submitted=time.time())
    return job


def follow(run_dir: RunDir, plan: Plan, job: str, poll: float = 0.5, state_every: float = 5.0) -> str:
    """The same live view as a local run, until the job leaves the queue; returns its last state.
    Ctrl-C stops following, not the job. The view reads the run's files every `poll` seconds; the
    controller is asked (squeue) only every `state_every`, which a shared cluster's controller prefers."""
    from rmspec.launch.local import title_of
    from rmspec.render.live_view import LiveView

    last, checked = "", 0.0
    with LiveView(run_dir.metrics, title_of(plan)) as view:
        view.note(f"SLURM job {job}: run directory {run_dir.root}, output {run_dir.root}/slurm-{job}.out")
        try:
            while True:
                view.poll()
                now = time.monotonic()
                if now - checked >= state_every:
                    checked = now
                    state = job_state(job)
                    if state != last:
                        view.note(f"job {job}: {state or 'gone from the queue'}")
                        last = state
                    if state not in ALIVE:
                        return state
                time.sleep(poll)
        except KeyboardInterrupt:
            view.note(f"stopped following; job {job} goes on (rmspec status {run_dir.root}, scancel {job})")
            return "FOLLOW_STOPPED"
