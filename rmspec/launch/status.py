"""What state a run is really in: RUN/status.json, checked against the living.

status.json says what the trainer last wrote. A trainer killed with SIGKILL (or a node that
died) leaves `running` behind, so a `running` run is live only while its trainer lock is held,
its pid lives (when it ran on this host) or its SLURM job is queued or running; otherwise it is
shown as `stopped`, with the last complete checkpoint to resume from. Light (no torch).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from rmspec.rundir import RunDir, Status, last_complete_checkpoint, read_status
from rmspec.rundir.lock import trainer_owner


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_status(root: Path) -> dict:
    """status.json plus: `live`, the effective `state`, the owner, the SLURM job state, the last checkpoint."""
    from rmspec.launch.slurm import ALIVE, job_state

    run = RunDir(Path(root))
    status = read_status(run)
    recorded = status.state or ("written" if run.plan.exists() else "unknown")
    out = {**status.to_json(), "run_dir": str(run.root), "recorded_state": recorded, "state": recorded}
    out["last_checkpoint"] = last_complete_checkpoint(run.checkpoints, remove_partial=False)  # a reader deletes nothing
    owner = trainer_owner(run.root)
    out["owner"] = owner
    job = status.slurm_job_id
    if job:
        out["slurm_state"] = job_state(str(job)) or None
    job_alive = bool(job) and out.get("slurm_state") in ALIVE
    here = status.host in (None, socket.gethostname())
    if recorded in ("running", "submitted"):
        if owner is not None or job_alive:
            live = True
        elif here:
            live = recorded == "running" and pid_alive(status.pid) and not _pid_reused(status)
        else:
            live = None  # another host, no lock visible and no SLURM job: cannot tell from here
        out["live"] = live
        if live is False:
            out["state"] = "stopped"
    else:
        out["live"] = owner is not None or job_alive
    return out


def _pid_reused(status: Status) -> bool:
    """A pid that lives again in another program is not the trainer (a rough but cheap check)."""
    try:
        cmdline = Path(f"/proc/{int(status.pid or 0)}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return False
    return "rmspec" not in cmdline
