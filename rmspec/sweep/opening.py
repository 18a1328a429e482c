"""Opening a sweep: claiming its directory, creating or loading its study, checking the spec it resumes with.

One owner per sweep directory: DIR/.claim.lock, exclusive for a sweep alone, shared by `--join` workers;
the first `--join` worker creates the study under DIR's create lock while the others wait, then join it.
A sweep resumes with the spec and --set it started with (its hash in sweep.json), or not at all.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import optuna

from rmspec.errors import RmspecError
from rmspec.rundir import atomic_write_json, read_json
from rmspec.rundir.lock import Lock, RunLocked, claim_lock
from rmspec.spec import LoadedSpec, load_spec
from rmspec.sweep import space, storage
from rmspec.sweep.layout import SweepDir
from rmspec.sweep.live import SweepView
from rmspec.sweep.state import Sweep
from rmspec.sweep.workers import worker_name


def start(spec_file: str, sets: tuple[str, ...], out: str | None, join: bool = False) -> tuple[Sweep, Any]:
    """A new sweep in DIR; with `join`, the sweep in DIR when one was started there (created if not)."""
    loaded = load_spec(spec_file, sets)
    sweep = loaded.spec.sweep
    if sweep is None:
        raise RmspecError(
            f"{spec_file} has no sweep: section",
            hint="add one (`rmspec schema` lists the sweep section's fields), or train it with `rmspec run`",
        )
    check_objective(loaded)
    root = Path(out or sweep.dir.format(name=loaded.spec.name))
    folder = SweepDir(root)
    if join and not storage.is_shared(sweep.storage):
        raise RmspecError(
            "--join shares the study between sweep processes; sweep.storage sqlite is for one process only "
            "(SQLite under several writers fails with 'database is locked')",
            hint="write sweep.storage: journal (a shared file system) or an RDB URL, e.g. --set sweep.storage=journal",
        )
    if not join:
        lock = _claim(folder, shared=False)
        if folder.is_sweep():
            lock.release()
            raise RmspecError(f"{root} already holds a sweep", hint=f"continue it with `rmspec sweep --resume {root}`")
        study = _create(folder, loaded, spec_file, sets, joined=False)
        return _sweep(loaded, sets, folder, study, joined=False), lock
    lock = _claim(folder, shared=True)
    try:
        with _held(folder.create_lock):  # one worker creates; the others wait for it, then join
            if folder.is_sweep():
                record = read_json(folder.sweep_json)
                if not record.get("joined"):
                    raise RmspecError(
                        f"{root} holds a sweep started without --join", hint=f"rmspec sweep --resume {root}"
                    )
                _same_spec(record, loaded)
                study = _study(folder, loaded, create=False, salt=worker_name())
            else:
                study = _create(folder, loaded, spec_file, sets, joined=True, salt=worker_name())
    except BaseException:
        lock.release()
        raise
    return _sweep(loaded, sets, folder, study, joined=True), lock


def resume(root: str) -> tuple[Sweep, Any]:
    folder = SweepDir(Path(root))
    if not folder.is_sweep():
        raise RmspecError(f"{root} holds no sweep (no sweep.json)", hint="give the directory rmspec sweep wrote (-o)")
    record = read_json(folder.sweep_json) if folder.sweep_json.exists() else {}
    joined = bool(record.get("joined"))
    lock = _claim(folder, shared=joined)  # a joined sweep resumes as one more worker
    try:
        loaded = load_spec(record["spec_path"], tuple(record.get("sets") or ()))
        _same_spec(record, loaded)
        study = _study(folder, loaded, create=False, salt=worker_name())  # not the sequence the stopped sweep drew
    except BaseException:
        lock.release()
        raise
    return _sweep(loaded, tuple(record.get("sets") or ()), folder, study, joined=joined), lock


def _sweep(loaded: LoadedSpec, sets: tuple[str, ...], folder: SweepDir, study: optuna.Study, joined: bool) -> Sweep:
    spec = loaded.spec.sweep
    assert spec is not None
    view = SweepView(loaded.spec.name, spec)
    return Sweep(loaded, sets, folder, study, view, storage=spec.storage, joined=joined)


def _create(
    folder: SweepDir, loaded: LoadedSpec, spec_file: str, sets: tuple[str, ...], joined: bool, salt: str | None = None
) -> optuna.Study:
    sweep = loaded.spec.sweep
    assert sweep is not None
    folder.root.mkdir(parents=True, exist_ok=True)
    study = _study(folder, loaded, create=True, salt=salt)
    for values in sweep.first_trials:
        study.enqueue_trial(values)
    # written last: a sweep.json names a study that exists (a worker killed before this leaves no sweep)
    atomic_write_json(
        folder.sweep_json,
        {
            "spec_path": str(Path(spec_file).resolve()),
            "sets": list(sets),
            "spec_hash": loaded.spec_hash,
            "study_name": loaded.spec.name,
            "storage_kind": sweep.storage,
            "storage": storage.location(folder, sweep.storage),
            "joined": joined,
        },
    )
    return study


def _same_spec(record: dict[str, Any], loaded: LoadedSpec) -> None:
    if loaded.spec_hash != record.get("spec_hash"):
        raise RmspecError(
            f"{record.get('spec_path')} (with its --set) differs from the sweep's: its trials would not be comparable",
            hint="give the spec and --set the sweep started with, or start a new sweep in another directory (-o)",
        )


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


def _claim(folder: SweepDir, shared: bool) -> Lock:
    if shared:
        # --join workers hold it together; a sweep alone (claim_lock, exclusive) cannot beside them
        lock = Lock(folder.root / ".claim.lock", shared=True)
        if not lock.try_acquire():
            raise RunLocked(
                f"{folder.root} is in use by a sweep started without --join: one sweep directory has one owner",
                hint=f"wait for it to end, or stop it and then `rmspec sweep --resume {folder.root}`",
            )
        return lock
    try:
        return claim_lock(folder.root, "rmspec sweep")
    except RunLocked as exc:
        raise RunLocked(
            exc.message.replace("one run directory", "one sweep directory"),
            hint=f"wait for it to end, or stop it and then `rmspec sweep --resume {folder.root}`"
            " (workers sharing a study: rmspec sweep SPEC -o DIR --join)",
        ) from None


class _held:
    """A blocking exclusive flock for a short critical section (creating the study)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)


def _study(folder: SweepDir, loaded: LoadedSpec, create: bool, salt: str | None = None) -> optuna.Study:
    sweep = loaded.spec.sweep
    assert sweep is not None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    where = storage.open_storage(folder, sweep.storage)
    sampler, pruner = space.sampler_of(sweep, salt), space.pruner_of(sweep)
    name = loaded.spec.name
    if create:
        direction = sweep.objective.direction
        return optuna.create_study(study_name=name, storage=where, sampler=sampler, pruner=pruner, direction=direction)
    return optuna.load_study(study_name=name, storage=where, sampler=sampler, pruner=pruner)
