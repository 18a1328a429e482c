"""RUN/status.json as a typed record: what the trainer (or `rmspec run --submit`) last said.

One writer API for every package: `write_status` (a new state, stamped `updated`) and
`update_status` (fields only, e.g. the SLURM job id at submission); both merge into what the
file holds and replace it atomically. `read_status` gives a `Status`. Keys keep the order they
were first written in, so rewriting the file changes only what changed. Light: no torch.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rmspec.rundir.layout import RunDir, atomic_write_json, read_json

# What a state means (docs/architecture.md): written by the trainer, except `submitted` (rmspec run --submit)
# and `pruned` (rmspec sweep, once its pruner stopped the run: `step` is the step of the report that pruned it).
STATES = ("submitted", "running", "evaluating", "completed", "interrupted", "failed", "pruned")
CLEARED_ON_RUNNING = ("error", "traceback", "push_error")  # a resumed run's old failure is not its state


@dataclass(frozen=True)
class Status:
    """status.json. Every field is optional: the file grows as the run goes."""

    state: str | None = None
    updated: float | None = None  # time.time() of the last write_status
    # who trains (rmspec status checks these against the living)
    pid: int | None = None
    host: str | None = None
    started: float | None = None
    resumed: bool | None = None
    resumed_from: str | None = None  # the checkpoint a resume started from
    world_size: int | None = None
    slurm_job_id: str | None = None
    slurm_restart_count: int | None = None
    submitted: float | None = None
    # progress and outcome
    step: int | None = None
    checkpoint: str | None = None  # the last complete checkpoint when interrupted
    metrics: dict[str, Any] | None = None
    reward_stats: dict[str, Any] | None = None
    train_seconds: float | None = None
    best_checkpoint: str | None = None
    model_dir: str | None = None
    micro_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    global_batch_size: int | None = None
    max_steps: int | None = None
    train_rows: int | None = None
    finished: float | None = None
    evaluation: str | None = None  # "done", or why the end-of-run evaluation was skipped
    push_error: str | None = None
    # a failure
    error: str | None = None
    hint: str | None = None
    exit_code: int | None = None
    traceback: str | None = None
    # keys this version does not know, kept as they are
    extra: Mapping[str, Any] = field(default_factory=dict)
    # the keys present in the file, in file order (a key set to null stays present)
    keys: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Status:
        known = _field_names()
        values = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, extra=extra, keys=tuple(data))

    def to_json(self) -> dict[str, Any]:
        order = list(self.keys) + [k for k in _field_names() if k not in self.keys and getattr(self, k) is not None]
        order += [k for k in self.extra if k not in order]
        return {k: self.get(k) for k in order}

    def get(self, key: str, default: Any = None) -> Any:
        """A field by its JSON name (known or extra); `default` when absent."""
        if key in _field_names():
            value = getattr(self, key)
            return default if value is None and key not in self.keys else value
        return self.extra.get(key, default)

    def merged(self, **changes: Any) -> Status:
        """This status with `changes` applied; new keys go after the existing ones, in the order given."""
        known = _field_names()
        extra = {**self.extra, **{k: v for k, v in changes.items() if k not in known}}
        keys = self.keys + tuple(k for k in changes if k not in self.keys)
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if k in known}, extra=extra, keys=keys)

    def without(self, *names: str) -> Status:
        known = _field_names()
        return dataclasses.replace(
            self,
            **{k: None for k in names if k in known},
            extra={k: v for k, v in self.extra.items() if k not in names},
            keys=tuple(k for k in self.keys if k not in names),
        )

    @property
    def shown_state(self) -> str | None:
        """The state a view shows: `state`, or `status` in a file written before the key was renamed."""
        return self.state or self.extra.get("status")


def _field_names() -> frozenset[str]:
    return _FIELDS


_FIELDS = frozenset(f.name for f in dataclasses.fields(Status) if f.name not in ("extra", "keys"))


def read_status(run: RunDir) -> Status:
    """RUN/status.json; an empty Status when it is missing or unreadable (a run not started yet)."""
    return Status.from_json(read_json(run.status))


def update_status(run: RunDir, **changes: Any) -> Status:
    """Merge `changes` into status.json (atomic replace); returns what was written."""
    status = read_status(run).merged(**changes)
    atomic_write_json(run.status, status.to_json())
    return status


def write_status(run: RunDir, state: str, **changes: Any) -> Status:
    """A new state, stamped with the time; `running` drops a previous failure's error fields."""
    status = read_status(run).merged(state=state, updated=time.time(), **changes)
    if state == "running":
        status = status.without(*CLEARED_ON_RUNNING)
    atomic_write_json(run.status, status.to_json())
    return status
