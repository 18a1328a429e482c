"""Everything a run directory holds, typed, in one layer every package reads and writes a run through.

- layout: `RunDir` (the path of every file), the lock file names, atomic writes, `read_json`;
- lock: one owner per run directory (flock(2) on the lock files: `claim_lock`, `acquire_trainer_lock`);
- status: `Status`, `read_status`, `write_status`, `update_status` (RUN/status.json);
- checkpoints: the one rule for the last complete checkpoint;
- metrics: RUN/metrics.jsonl (truncate on resume, last values);
- spec: `load_run_spec` (RUN/spec.yaml, the spec as run);
- results: RUN/results.json and the per-example JSONL files.
The plan (RUN/plan.json) is the typed `rmspec.plan.Plan`, read and written by rmspec.plan.artifact:
the planner names this layer's files, so this layer sits below it and never imports it.
Light on purpose: no torch, nothing heavy at import.
"""

from rmspec.rundir.checkpoints import checkpoint_is_final, checkpoint_step, last_complete_checkpoint
from rmspec.rundir.layout import (
    CLAIM_LOCK,
    LOCK_FILES,
    TRAINER_LOCK,
    RunDir,
    atomic_write_json,
    atomic_write_text,
    read_json,
)
from rmspec.rundir.metrics import last_metrics, truncate_metrics_after
from rmspec.rundir.spec import load_run_spec
from rmspec.rundir.status import Status, read_status, update_status, write_status

__all__ = [
    "CLAIM_LOCK",
    "LOCK_FILES",
    "TRAINER_LOCK",
    "RunDir",
    "Status",
    "atomic_write_json",
    "atomic_write_text",
    "checkpoint_is_final",
    "checkpoint_step",
    "last_complete_checkpoint",
    "last_metrics",
    "load_run_spec",
    "read_json",
    "read_status",
    "truncate_metrics_after",
    "update_status",
    "write_status",
]
