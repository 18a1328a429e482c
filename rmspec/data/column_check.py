"""The mapping's columns checked against local files before any run: `validate` and `plan` read the
rows of each small `kind: files` source (cheap: no datasets, no Arrow) and
ask the same RowMapper the data stage uses whether the columns it needs are there.

Without it a file missing a column was `valid` for validate and plan, and `rmspec run` created the run
directory and launched the training processes before saying so. Hub and SQL sources are not read
here (a network call or a query is not cheap); the data stage still checks them. Light: no torch,
no datasets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec import rows
from rmspec.errors import DataError

# Arrow's columns are the union over all rows of all files, so every row is read: only files this
# small (about a second of reading); larger ones are left to the data stage.
MAX_BYTES = 50 * 2**20


def file_columns(paths: list[str], fmt: str, encoding: str) -> list[str] | None:
    """The columns over every readable row of the files, in order of appearance; None when they
    cannot be read cheaply (too large, or broken: the data stage then says what is wrong)."""
    seen: dict[str, None] = {}
    try:
        if sum(Path(p).stat().st_size for p in paths) > MAX_BYTES:
            return None
        for path in paths:
            for row in rows.open_rows(path, fmt, encoding=encoding):
                if row.value is not None:
                    seen.update(dict.fromkeys(row.value))
    except (rows.RowError, OSError, ValueError):
        return None
    return list(seen) or None


def check_local_columns(loaded: Any) -> None:
    """A DataError (located at data.mapping or data.sources[i].mapping) when a local file lacks a column
    the mapping needs; nothing for other sources or files that cannot be read cheaply."""
    from rmspec.data.presets import RowMapper

    spec = loaded.spec
    if spec.data.sources:
        entries = [(f"data.sources[{i}]", e.source, e.mapping) for i, e in enumerate(spec.data.sources)]
    else:
        entries = [("data", spec.data.source, spec.data.mapping)]
    for where, source, mapping in entries:
        if getattr(source, "kind", None) != "files":
            continue
        try:
            paths = rows.resolve_paths(source.paths, Path(loaded.base_dir))
        except rows.RowError:
            continue  # a missing file is the data stage's (and --check-paths') located error
        columns = file_columns(paths, source.format, getattr(source, "encoding", "utf-8") or "utf-8")
        if columns is None:
            continue
        try:
            RowMapper(mapping, spec.approach, columns, where=f"{where}.mapping")
        except DataError as exc:
            raise DataError(f"{exc.message} (columns read from {', '.join(paths[:3])})", exc.hint) from None
