"""Records of a benchmark released as JSON files (RMB's one JSON list per scenario file, PRMBench's
JSON Lines), read through the one row reader (rmspec.rows) and checked field by field.

Every problem is a DataError that names the file and the record (`FILE:N`, N the 1-based line of a
JSON Lines file or item of a JSON list), so a hostile file stops with a located message and exit 2
instead of a traceback from deep in the scoring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import DataError

RECORD_SUFFIXES = (".json", ".jsonl")


@dataclass
class Record:
    where: str  # FILE:N
    value: dict[str, Any]
    file: str


def record_files(kind: str, source: str) -> list[str]:
    """The file itself, or every .json/.jsonl file under a folder (sorted, recursively)."""
    path = Path(source)
    if path.is_file():
        return [str(path)]
    found = sorted(str(p) for p in path.rglob("*") if p.is_file() and p.suffix.lower() in RECORD_SUFFIXES)
    if not found:
        raise DataError(
            f"benchmark {kind!r}: {source} holds no .json or .jsonl file",
            "point path at the benchmark's file, or at the folder of its released files",
        )
    return found


def read_records(kind: str, source: str, hint: str) -> list[Record]:
    """Every record of the file (or folder); an empty file is an error, as is any unreadable record."""
    from rmspec.rows import RowError, open_rows

    records: list[Record] = []
    for file in record_files(kind, source):
        try:
            rows = list(open_rows(file, "json" if file.lower().endswith(".json") else "auto"))
        except RowError as exc:
            raise DataError(f"benchmark {kind!r}: {exc}", hint) from None
        if not rows:
            raise DataError(f"benchmark {kind!r}: {file} has no records (an empty file)", hint)
        for row in rows:
            where = f"{file}:{row.line}"
            if row.error is not None or row.value is None:
                detail = row.error.detail if row.error is not None else "not a record"
                raise DataError(f"benchmark {kind!r}: {where}: {detail}", hint)
            records.append(Record(where, row.value, file))
    return records


class Fields:
    """Typed reads of one record's fields, each failure a DataError naming the record and field."""

    def __init__(self, kind: str, record: Record, hint: str):
        self.kind, self.record, self.hint = kind, record, hint

    def fail(self, field: str, detail: str) -> DataError:
        return DataError(f"benchmark {self.kind!r}: {self.record.where}: field {field!r}: {detail}", self.hint)

    def get(self, field: str, check: Callable[[Any], bool], expected: str) -> Any:
        data: Mapping[str, Any] = self.record.value
        if field not in data:
            raise self.fail(field, f"missing (has: {', '.join(map(str, data)) or 'nothing'})")
        got = data[field]
        if not check(got):
            raise self.fail(field, f"expected {expected}, got {type(got).__name__} {str(got)[:60]!r}")
        return got

    def text(self, field: str) -> str:
        return str(self.get(field, lambda v: isinstance(v, str), "a string"))

    def ident(self, field: str) -> str:
        got = self.get(field, lambda v: isinstance(v, (str, int)) and not isinstance(v, bool), "a string or number")
        return str(got)

    def texts(self, field: str) -> list[str]:
        got = self.get(
            field,
            lambda v: isinstance(v, list) and bool(v) and all(isinstance(s, str) for s in v),
            "a non-empty list of strings",
        )
        return list(got)

    def mapping(self, field: str) -> dict[str, Any]:
        return dict(self.get(field, lambda v: isinstance(v, dict), "an object"))
