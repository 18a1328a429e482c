"""Rows of an input file for `rmspec score`: files through the one row reader (rmspec.rows:
JSONL line by line, Parquet by record batch, CSV by row, a JSON array whole), `save_to_disk`
folders by Arrow batch (memory-mapped). A line that is not a JSON object becomes a `BadRow`,
which the runner rejects with its reason instead of stopping the run; a problem with the whole
file is a DataError (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec import rows
from rmspec.errors import DataError

FORMATS = (*rows.FORMATS, "save_to_disk")


@dataclass
class BadRow:
    reason: str
    raw: str
    kind: str = "is not a JSON object"  # what the summary counts it under: the reason without its place


@dataclass
class Source:
    path: Path
    format: str
    total: int | None  # rows, when cheap to know (progress bar)
    rows: Iterator[dict[str, Any] | BadRow]


def open_rows(path: str | Path, *, split: str | None = None, skip: int = 0) -> Source:
    """The rows of `path` after the first `skip` (a resumed run's finished rows)."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"{path}: file not found", "give a JSONL, JSON, Parquet or CSV file, or a save_to_disk folder")
    fmt = detect_format(p)
    if fmt == "save_to_disk":
        return _saved(p, split, skip)
    try:
        # Blank JSONL lines count as rows (rejected as empty), so `skip` and row numbers follow the lines.
        opened = rows.open_rows(p, fmt, skip=skip, blanks=True)
    except rows.RowError as exc:
        raise _data_error(exc) from None
    total = rows.count_lines(p) if opened.format == "jsonl" else opened.total
    return Source(p, opened.format, total, _as_rows(opened.rows, opened.format))


def detect_format(p: Path) -> str:
    if p.is_dir():
        if (p / "dataset_info.json").exists() or (p / "state.json").exists() or (p / "dataset_dict.json").exists():
            return "save_to_disk"
        raise DataError(
            f"{p} is a folder but not a datasets save_to_disk folder (no dataset_info.json or dataset_dict.json)",
            "point at a file (.jsonl, .json, .parquet, .csv) or at the folder Dataset.save_to_disk wrote",
        )
    fmt = rows.format_of(p)
    if fmt is None:
        raise DataError(
            f"{p}: cannot tell the format from the name",
            "use .jsonl, .json, .parquet or .csv (or a save_to_disk folder)",
        )
    return fmt


HINTS = {
    rows.ENCODING: "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)",
    rows.INVALID_JSON: "fix the file, or write one object per line (.jsonl)",
    rows.NOT_ARRAY: "write [{...}, {...}] or use JSONL",
    rows.UNREADABLE: "check the file, or convert it to JSONL",
    rows.WRONG_FORMAT: "rename it to what it is (.jsonl, .json, .csv, .parquet), or convert it to JSONL",
}


def _data_error(exc: rows.RowError) -> DataError:
    """A whole-file problem: exit 2 with its place."""
    if exc.code == rows.ENCODING:
        return DataError(f"{exc.where}: not UTF-8 text: {exc.msg}", HINTS[rows.ENCODING])
    if exc.code == rows.WRONG_FORMAT:
        return DataError(f"{exc.file} {exc.detail}", HINTS[rows.WRONG_FORMAT])
    return DataError(str(exc), HINTS.get(exc.code, "give a JSONL, JSON, Parquet or CSV file, or a save_to_disk folder"))


def _as_rows(read: Iterator[rows.Row], fmt: str) -> Iterator[dict[str, Any] | BadRow]:
    """Rows as the runner takes them: a dict, or a BadRow whose reason says what and which line."""
    for row in read:
        if row.error is None:
            assert row.value is not None, "rows.Row without an error carries its value"
            # Conversations in a CSV cell are JSON text: read them back as lists.
            yield {k: _maybe_json(v) for k, v in row.value.items()} if fmt == "csv" else row.value
        else:
            yield BadRow(_reason(row.error), row.raw, KINDS.get(row.error.code, "is not a JSON object"))


KINDS = {
    rows.ENCODING: "encoding",
    rows.LONE_SURROGATE: "encoding",
    rows.EMPTY_LINE: "is empty",
    rows.INVALID_JSON: "is not valid JSON",
}


def _reason(exc: rows.RowError) -> str:
    n = exc.line
    if exc.code == rows.ENCODING:
        return f"encoding: line {n}, {exc.detail.split(' does not decode')[0]} is not UTF-8 (convert the file to UTF-8)"
    if exc.code == rows.LONE_SURROGATE:
        return f"encoding: line {n}, {exc.detail}"
    if exc.code == rows.EMPTY_LINE:
        return f"line {n} is empty"
    if exc.code == rows.INVALID_JSON:
        return (
            f"line {n} is not valid JSON ({exc.msg} at column {exc.col})"
            if exc.col
            else f"line {n} is not valid JSON ({exc.detail})"
        )
    if exc.code == rows.NOT_OBJECT and "item" in exc.detail:
        return exc.detail  # an item of a JSON array
    return f"line {n} is not a JSON object"


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] == "[" and value[-1:] == "]":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _saved(p: Path, split: str | None, skip: int) -> Source:
    from datasets import DatasetDict, load_from_disk

    ds = load_from_disk(str(p))
    if isinstance(ds, DatasetDict):
        names = list(ds)
        if split is None and len(names) == 1:
            split = names[0]
        if split not in ds:
            raise DataError(
                f"{p} holds splits {', '.join(names)}" + (f", not {split!r}" if split else ""),
                f"choose one with --split (e.g. --split {names[0]})",
            )
        ds = ds[split]

    def rows() -> Iterator[dict[str, Any]]:
        for start in range(skip, len(ds), 1024):
            yield from _columns_to_rows(ds[start : start + 1024])

    return Source(p, "save_to_disk", len(ds), rows())


def _columns_to_rows(batch: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(batch)
    return [dict(zip(names, values)) for values in zip(*(batch[n] for n in names))]
