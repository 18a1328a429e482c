"""Where a sweep's Optuna study lives (sweep.storage), and how anyone opens it.

- sqlite: DIR/study.db through Optuna's RDBStorage. One sweep process only: SQLite under several
  writing processes fails with "database is locked" (Optuna #820, #4994), and over NFS its locks are unsafe.
- journal: DIR/study.journal, Optuna's JournalStorage over a JournalFileBackend: an append-only log every
  process replays, with its own file lock; the storage Optuna names for several processes on a shared
  file system (what `rmspec sweep --join` workers on several nodes use).
- an RDB URL (postgresql://..., mysql://...): the study on a database server every worker reaches; the URL is
  recorded in sweep.json, so put the password in the database client's own files (~/.pgpass), not the URL.
"""

from __future__ import annotations

from typing import Any

from rmspec.sweep.layout import SweepDir


def is_shared(kind: str) -> bool:
    """Several sweep processes may work on this storage at once."""
    return kind != "sqlite"


def location(folder: SweepDir, kind: str) -> str:
    """What sweep.json records: the URL, or the journal file's path."""
    if kind == "sqlite":
        return folder.storage_url
    if kind == "journal":
        return str(folder.study_journal.resolve())
    return kind


def open_storage(folder: SweepDir, kind: str) -> Any:
    """The Optuna storage object (or URL) for optuna.create_study / load_study."""
    if kind == "journal":
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        return JournalStorage(JournalFileBackend(str(folder.study_journal.resolve())))
    return location(folder, kind)


def how_to_open(folder: SweepDir, kind: str, name: str) -> str:
    """How to open the study, for the console: optuna-dashboard for an RDB, Optuna's Python for a journal."""
    if kind == "journal":
        return (
            f"optuna.load_study(study_name={name!r}, storage=optuna.storages.JournalStorage("
            f"optuna.storages.journal.JournalFileBackend({location(folder, kind)!r})))"
        )
    return f"optuna-dashboard {location(folder, kind)}"
