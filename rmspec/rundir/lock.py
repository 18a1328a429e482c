"""One owner per run directory, with locks the kernel releases when their holder dies.

Why flock and not a pid file: a pid file outlives a SIGKILL and needs a liveness guess (pids are
reused, and another host's pid cannot be checked), while an flock(2) lock belongs to an open
file and is dropped by the kernel the moment the process holding it exits, however it exits.
So a crash never leaves a stale lock and nothing has to be cleaned up before a resume.
The lock file also holds its owner's record (pid, host, SLURM job) for the refusal message.

Two locks, because two processes own a run in turn and a lock cannot be handed across exec:
- RUN/.claim.lock: `rmspec run` (the parent) from the moment it claims the directory until it
  exits, covering the writing of the run files and the seconds the trainer needs to start;
- RUN/.trainer.lock: the training process of global rank 0, for as long as it trains. Killing
  the parent alone leaves the trainer running, and its lock keeps a second one out.
A claimant takes the claim lock and tests the trainer lock; a trainer takes the trainer lock.
Light: no torch.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.rundir.layout import LOCK_FILES, RunDir

__all__ = ["LOCK_FILES", "Lock", "RunLocked", "acquire_trainer_lock", "claim_lock", "held_by", "trainer_owner"]


# A lock file's JSON record of its holder: pid, host, role, since and maybe slurm_job_id.
OwnerRecord = dict[str, Any]


class RunLocked(RmspecError):
    """The run directory has a live owner."""


def owner_record(role: str) -> OwnerRecord:
    record = {"pid": os.getpid(), "host": socket.gethostname(), "role": role, "since": time.time()}
    if os.environ.get("SLURM_JOB_ID"):
        record["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    return record


def describe(record: OwnerRecord | None) -> str:
    if not record:
        return "another process (no owner record yet)"
    job = f", SLURM job {record['slurm_job_id']}" if record.get("slurm_job_id") else ""
    return f"{record.get('role', 'a process')} pid {record.get('pid', '?')} on host {record.get('host', '?')}{job}"


@dataclass
class Lock:
    """An flock(2) lock on one file; released by release() or by the holder's death. `shared`: taken
    shared (LOCK_SH), which any number of holders may hold together and no exclusive one beside them."""

    path: Path
    fd: int | None = None
    shared: bool = False

    def try_acquire(self, record: OwnerRecord | None = None) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.fd = fd
        if record is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        return True

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing the only descriptor of the open file drops the lock

    def record(self) -> OwnerRecord | None:
        try:
            record = json.loads(self.path.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            return None
        # Only try_acquire writes this file, always a JSON object; anything else is no record.
        return record if isinstance(record, dict) else None


def held_by(path: Path) -> OwnerRecord | None:
    """The owner record when someone holds the lock at `path`, else None (tested without waiting)."""
    if not path.exists():
        return None
    probe = Lock(path)
    if probe.try_acquire():
        probe.release()
        return None
    return probe.record() or {}


def trainer_owner(root: Path) -> OwnerRecord | None:
    return held_by(RunDir(Path(root)).trainer_lock)


def claim_lock(root: Path, command: str) -> Lock:
    """Take the run directory for `rmspec run` (fresh, --resume or --overwrite), or refuse."""
    root = Path(root)
    lock = Lock(RunDir(root).claim_lock)
    if not lock.try_acquire(owner_record(command)):
        raise _locked(root, lock.record())
    trainer = trainer_owner(root)
    if trainer is not None:
        lock.release()
        raise _locked(root, trainer)
    return lock


def acquire_trainer_lock(root: Path, wait: float = 5.0) -> Lock:
    """The trainer's lock, retried for `wait` seconds (a claimant or `rmspec status` tests it for a
    moment); RunLocked when another trainer owns the run."""
    lock = Lock(RunDir(Path(root)).trainer_lock)
    end = time.monotonic() + wait
    while not lock.try_acquire(owner_record("trainer")):
        if time.monotonic() > end:
            raise _locked(Path(root), lock.record())
        time.sleep(0.1)
    return lock


def _locked(root: Path, record: OwnerRecord | None) -> RunLocked:
    pid = (record or {}).get("pid")
    stop = f"stop it (kill {pid}) " if pid else "stop it "
    return RunLocked(
        f"{root} is in use by {describe(record)}: one run directory has one owner at a time",
        hint=f"follow it with `rmspec status {root}`, wait for it to end, or {stop}and then "
        f"`rmspec run --resume {root}`",
    )
