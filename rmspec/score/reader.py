"""Rows of an input file, streamed: JSONL line by line, Parquet by record batch, CSV by row,
`save_to_disk` folders by Arrow batch (memory-mapped). A JSON array is read whole (use JSONL
for files larger than memory). A line that is not a JSON object becomes a `BadRow`, which the
runner rejects with its reason instead of stopping the run.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rmspec.errors import DataError

FORMATS = ("jsonl", "json", "parquet", "csv", "save_to_disk")


@dataclass
class BadRow:
    reason: str
    raw: str


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
    if fmt == "jsonl":
        return Source(p, fmt, _count_lines(p), _jsonl(p, skip))
    if fmt == "json":
        return _json_array(p, skip)
    if fmt == "csv":
        _require_utf8(p)
        return Source(p, fmt, None, _csv(p, skip))
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(p)
        except Exception as exc:
            raise DataError(f"{path}: not a readable Parquet file ({exc})", "check the file, or convert it to JSONL") from None
        return Source(p, fmt, pf.metadata.num_rows, _parquet(pf, skip))
    return _saved(p, split, skip)


def detect_format(p: Path) -> str:
    if p.is_dir():
        if (p / "dataset_info.json").exists() or (p / "state.json").exists() or (p / "dataset_dict.json").exists():
            return "save_to_disk"
        raise DataError(f"{p} is a folder but not a datasets save_to_disk folder (no dataset_info.json or dataset_dict.json)",
                        "point at a file (.jsonl, .json, .parquet, .csv) or at the folder Dataset.save_to_disk wrote")
    suffixes = [s.lower() for s in p.suffixes]
    for fmt, names in (("jsonl", (".jsonl", ".ndjson")), ("json", (".json",)), ("parquet", (".parquet", ".pq")), ("csv", (".csv",))):
        if suffixes and suffixes[-1] in names:
            return fmt
    raise DataError(f"{p}: cannot tell the format from the name", "use .jsonl, .json, .parquet or .csv (or a save_to_disk folder)")


def _count_lines(p: Path) -> int:
    n = 0
    with p.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    with p.open("rb") as f:  # a last line without a newline
        f.seek(0, 2)
        if f.tell():
            f.seek(-1, 2)
            n += f.read(1) != b"\n"
    return n


def _jsonl(p: Path, skip: int) -> Iterator[dict[str, Any] | BadRow]:
    # Bytes, decoded line by line: a line that is not UTF-8 is rejected with its place, never
    # scored with its bytes silently replaced.
    with p.open("rb") as f:
        for i, raw in enumerate(f):
            if i < skip:
                continue
            if i == 0 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                col = len(raw[:exc.start].decode("utf-8", errors="replace")) + 1
                yield BadRow(f"encoding: line {i + 1}, byte 0x{raw[exc.start]:02x} at column {col} is not UTF-8 "
                             "(convert the file to UTF-8)", raw[:2000].decode("utf-8", errors="replace"))
                continue
            if not text:
                yield BadRow(f"line {i + 1} is empty", "")
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                yield BadRow(f"line {i + 1} is not valid JSON ({exc.msg} at column {exc.colno})", text[:2000])
                continue
            yield row if isinstance(row, dict) else BadRow(f"line {i + 1} is not a JSON object", text[:2000])


def _require_utf8(p: Path) -> None:
    """A JSON array or CSV with a byte that is not UTF-8: an error at its line and column (the whole
    file is one document, so there is no single row to reject)."""
    from rmspec.data.sources import first_undecodable

    bad = first_undecodable(str(p), "utf-8")
    if bad is not None:
        line, col, what = bad
        raise DataError(f"{p}:{line}:{col}: not UTF-8 text: {what}", "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)")


def _json_array(p: Path, skip: int) -> Source:
    _require_utf8(p)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{p}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})", "fix the file, or write one object per line (.jsonl)") from None
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        data = next(iter(data.values()))  # {"data": [...]}
    if not isinstance(data, list):
        raise DataError(f"{p}: expected a JSON array of objects, got {type(data).__name__}", "write [{...}, {...}] or use JSONL")
    rows = (r if isinstance(r, dict) else BadRow(f"item {i} is not a JSON object", json.dumps(r)[:2000])
            for i, r in enumerate(data) if i >= skip)
    return Source(p, "json", len(data), rows)


def _csv(p: Path, skip: int) -> Iterator[dict[str, Any] | BadRow]:
    with p.open("r", encoding="utf-8-sig", newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i >= skip:
                # Conversations in a CSV cell are JSON text: read them back as lists.
                yield {k: _maybe_json(v) for k, v in row.items() if k is not None}


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] == "[" and value[-1:] == "]":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _parquet(pf: Any, skip: int) -> Iterator[dict[str, Any]]:
    seen = 0
    for batch in pf.iter_batches(batch_size=1024):
        if seen + batch.num_rows <= skip:
            seen += batch.num_rows
            continue
        rows = batch.to_pylist()
        start = max(0, skip - seen)
        seen += batch.num_rows
        yield from rows[start:]


def _saved(p: Path, split: str | None, skip: int) -> Source:
    from datasets import DatasetDict, load_from_disk

    ds = load_from_disk(str(p))
    if isinstance(ds, DatasetDict):
        names = list(ds)
        if split is None and len(names) == 1:
            split = names[0]
        if split not in ds:
            raise DataError(f"{p} holds splits {', '.join(names)}" + (f", not {split!r}" if split else ""),
                            f"choose one with --split (e.g. --split {names[0]})")
        ds = ds[split]

    def rows() -> Iterator[dict[str, Any]]:
        for start in range(skip, len(ds), 1024):
            yield from _columns_to_rows(ds[start:start + 1024])

    return Source(p, "save_to_disk", len(ds), rows())


def _columns_to_rows(batch: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(batch)
    return [dict(zip(names, values)) for values in zip(*(batch[n] for n in names))]
