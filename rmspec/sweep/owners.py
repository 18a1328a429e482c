"""Who still works on a trial's run directory after its sweep process died, so that no one starts a second.

A trial's `rmspec run` runs in a session of its own: killing the sweep (even its whole process group with
SIGKILL) leaves the run training, and the resume must wait for it rather than start it again beside it (the
defect of issue 39: the re-run failed on the orphan's lock, the study recorded FAIL, the orphan then wrote
results.json). The owner is, in the order asked:
- the run's claim lock (`rmspec run`, from claiming the directory until it exits) or trainer lock (rank 0
  while it trains): flocks, dropped by the kernel when their holder dies, readable from any node sharing the
  file system;
- a process on this host whose command line names the run: its `rmspec run` (output.dir=RUN, or --resume
  RUN) before it claimed the directory, its launcher and workers (RUN/plan.json on their command line) in the
  seconds after their `rmspec run` died and before the trainer took its lock;
- the SLURM job the sweep submitted for the run (sweep.slurm), while squeue still knows it alive.
Light: psutil and the SLURM client only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rmspec.rundir import RunDir
from rmspec.rundir.lock import describe, held_by


def live_owner(run_dir: Path, job: str | None = None) -> str | None:
    """Who owns the run now (for the console), or None when no one does."""
    run = RunDir(Path(run_dir))
    for path in (run.claim_lock, run.trainer_lock):
        record = held_by(path)
        if record is not None:
            return describe(record)
    pids = local_processes(run)
    if pids:
        return f"process(es) {', '.join(map(str, pids))} on this host running {run.plan}"
    if job:
        from rmspec.launch.slurm import ALIVE, job_state

        state = job_state(job)
        if state in ALIVE:
            return f"SLURM job {job} ({state})"
    return None


def local_processes(run: RunDir) -> list[int]:
    """Processes on this host (other than this one) whose command line names the run (see above)."""
    import psutil

    root = run.root.resolve()
    names = {str(root / "plan.json"), str(root), f"output.dir={json.dumps(str(root))}"}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["pid"] == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if names.intersection(proc.info["cmdline"] or []):
                found.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return sorted(found)
