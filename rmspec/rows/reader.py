"""Rows of one file, streamed, each with its `file:line`: JSON Lines, a JSON document, CSV, Parquet.

A JSON Lines line that cannot be read is a Row with its `error`, so the caller can reject it and
go on; what is wrong with the whole file is a RowError raised by `open_rows`. pyarrow is imported
inside the Parquet branch only.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmspec.rows.errors import (
    EMPTY_LINE,
    ENCODING,
    FORMATS,
    INVALID_JSON,
    LONE_SURROGATE,
    NOT_ARRAY,
    NOT_FOUND,
    NOT_OBJECT,
    UNKNOWN_FORMAT,
    UNREADABLE,
    RowError,
)
from rmspec.rows.formats import check_magic, format_of, is_json_lines
from rmspec.rows.guards import first_undecodable


@dataclass
class Row:
    """One row (`value`, a dict) or one unreadable line (`error`), with its place: `line` is the
    line number (JSON Lines, CSV: the line the record ends on), the item number (JSON array) or
    the row number (Parquet), all 1-based; `raw` is the line's text (up to 2,000 characters)."""

    file: str
    line: int
    value: dict[str, Any] | None = None
    error: RowError | None = None
    raw: str = ""


@dataclass
class RowFile:
    """An opened file: its format, the row count when cheap to know (None otherwise), its rows."""

    path: str
    format: str
    total: int | None
    rows: Iterator[Row] = field(repr=False)

    def __iter__(self) -> Iterator[Row]:
        return self.rows


def decoded_lines(
    path: str | Path, encoding: str = "utf-8", *, blanks: bool = False
) -> Iterator[tuple[int, str | None, RowError | None]]:
    """(line number, text or None, RowError(encoding) or None) for each line, decoded one by one
    (a UTF-8 byte-order mark on the first line is dropped); blank lines only with `blanks`."""
    utf8 = encoding.replace("_", "-").lower() in ("utf-8", "utf8")
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if number == 1 and utf8 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip() and not blanks:
                continue
            try:
                yield number, raw.decode(encoding), None
            except UnicodeDecodeError as exc:
                col = len(raw[: exc.start].decode(encoding, errors="replace")) + 1
                yield (
                    number,
                    None,
                    RowError(
                        ENCODING,
                        f"byte 0x{raw[exc.start]:02x} at column {col} does not decode as {encoding} ({exc.reason})",
                        str(path),
                        number,
                        col,
                        msg=raw[:2000].decode(encoding, errors="replace"),
                    ),
                )


def _short_msg(exc: json.JSONDecodeError) -> str:
    """The parser's message without the position: Python's own ends some in " at" ("Invalid control
    character at"), which reads "at at column 34" once a caller adds where."""
    return exc.msg.removesuffix(" at")


def parse_line(text: str, file: str = "", line: int | None = None) -> dict[str, Any]:
    """One JSON object; RowError invalid_json (bad JSON or nesting too deep), not_object, or
    lone_surrogate (valid JSON, but an escaped lone surrogate is not Unicode text)."""
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RowError(INVALID_JSON, str(exc), file, line, exc.colno, msg=_short_msg(exc)) from None
    except RecursionError as exc:  # thousands of nested brackets
        raise RowError(INVALID_JSON, str(exc), file, line) from None
    if not isinstance(row, dict):
        raise RowError(NOT_OBJECT, f"a JSON {type(row).__name__}, not an object", file, line)
    if "\\ud" in text.lower():  # an escaped surrogate: valid JSON, but a lone one cannot be stored as text
        try:
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RowError(
                LONE_SURROGATE, f"a lone surrogate {exc.object[exc.start]!r} is not Unicode text", file, line
            ) from None
    return row


# ---------------------------------------------------------------- rows


def open_rows(
    path: str | Path, fmt: str = "auto", *, encoding: str = "utf-8", skip: int = 0, blanks: bool = False
) -> RowFile:
    """The rows of one file after the first `skip`, streamed (a JSON array is read whole).

    Raises RowError for what is wrong with the whole file (not found, unknown format, magic bytes
    of another format, bytes that do not decode in a JSON document or a CSV, a JSON document that
    is not an array of rows, an unreadable Parquet file). A JSON Lines line that cannot be read
    comes as a Row with its `error` (encoding, invalid_json, not_object, lone_surrogate; with
    `blanks`, empty_line for a blank line, which then counts as a row) so the caller can reject it
    and go on. `skip` counts rows as yielded (blank lines included with `blanks`)."""
    path = str(path)
    if not os.path.isfile(path):
        raise RowError(NOT_FOUND, "file not found", path)
    kind = format_of(path, fmt)
    if kind not in FORMATS:
        raise RowError(
            UNKNOWN_FORMAT,
            f"cannot tell the format from the name {Path(path).name!r}" if kind is None else f"unknown format {kind!r}",
            path,
            field="format",
        )
    check_magic(path, kind)
    if kind == "json" and _lines_not_document(path):
        kind = "jsonl"
    if kind == "jsonl":
        return RowFile(path, "jsonl", None, _json_lines(path, encoding, skip, blanks))
    if kind == "json":
        return _json_document(path, encoding, skip)
    if kind == "csv":
        _require_text(path, encoding)
        return RowFile(path, "csv", None, _csv(path, encoding, skip))
    return _parquet(path, skip)


def iter_rows(path: str | Path, fmt: str = "auto", **kwargs: Any) -> Iterator[Row]:
    """`open_rows(...).rows`: the rows alone."""
    return open_rows(path, fmt, **kwargs).rows


def _lines_not_document(path: str) -> bool:
    """Whether a .json file (or `format: json`) holds JSON Lines: it starts with `{` and its first
    line is an object by itself, unless that line is the whole file and a `{"data": [...]}`."""
    if not is_json_lines(path):
        return False
    if path.lower().endswith((".jsonl", ".ndjson")):
        return True
    with open(path, "rb") as fh:
        first = next((raw for raw in fh if raw.strip()), b"")
        rest_blank = all(not raw.strip() for raw in fh)
    try:
        value = json.loads(first.lstrip(b"\xef\xbb\xbf"))
    except (ValueError, RecursionError):
        return False  # a document spread over lines (pretty-printed)
    return not (rest_blank and isinstance(unwrap(value), list))


def _json_lines(path: str, encoding: str, skip: int, blanks: bool) -> Iterator[Row]:
    seen = 0
    for number, text, problem in decoded_lines(path, encoding, blanks=blanks):
        seen += 1
        if seen <= skip:
            continue
        if text is None:  # the line's bytes do not decode: `problem` says where
            yield Row(path, number, error=problem, raw=problem.msg if problem else "")
        elif not text.strip():
            yield Row(path, number, error=RowError(EMPTY_LINE, "the line is empty", path, number))
        else:
            try:
                yield Row(path, number, parse_line(text, path, number), raw=text.strip()[:2000])
            except RowError as exc:
                yield Row(path, number, error=exc, raw=text.strip()[:2000])


def _require_text(path: str, encoding: str) -> None:
    """A JSON document or CSV with bytes that do not decode: an error at its line and column (the
    whole file is one document, so there is no single row to reject)."""
    bad = first_undecodable(path, encoding)
    if bad is not None:
        line, col, what = bad
        raise RowError(ENCODING, f"not {encoding} text: {what}", path, line, col)


def unwrap(data: Any) -> Any:
    """`{"data": [...]}`, or any object of one key holding a list, stands for that list."""
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return data["data"]
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        return next(iter(data.values()))
    return data


def _text_encoding(encoding: str) -> str:
    """UTF-8 read with its byte-order mark dropped."""
    return "utf-8-sig" if encoding.replace("_", "-").lower() in ("utf-8", "utf8") else encoding


def _json_document(path: str, encoding: str, skip: int) -> RowFile:
    _require_text(path, encoding)
    with open(path, encoding=_text_encoding(encoding)) as fh:
        text = fh.read()
    try:
        data = unwrap(json.loads(text))
    except json.JSONDecodeError as exc:
        raise RowError(
            INVALID_JSON, f"not valid JSON ({_short_msg(exc)})", path, exc.lineno, exc.colno, msg=_short_msg(exc)
        ) from None
    except RecursionError as exc:
        raise RowError(INVALID_JSON, f"not valid JSON ({exc})", path) from None
    if not isinstance(data, list):
        raise RowError(NOT_ARRAY, f"expected a JSON array of objects, got {type(data).__name__}", path)

    def rows() -> Iterator[Row]:
        for i, value in enumerate(data[skip:], skip + 1):
            if isinstance(value, dict):
                yield Row(path, i, value)
            else:
                raw = json.dumps(value)[:2000]
                yield Row(path, i, error=RowError(NOT_OBJECT, f"item {i - 1} is not a JSON object", path, i), raw=raw)

    return RowFile(path, "json", len(data), rows())


def _csv(path: str, encoding: str, skip: int) -> Iterator[Row]:
    with open(path, encoding=_text_encoding(encoding), newline="") as fh:
        reader = csv.DictReader(fh)
        for i, row in enumerate(reader):
            if i >= skip:
                yield Row(path, reader.line_num, {k: v for k, v in row.items() if k is not None})


def _parquet(path: str, skip: int) -> RowFile:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types; all mean "not a readable Parquet file"
        raise RowError(UNREADABLE, f"not a readable Parquet file ({exc})", path) from None

    def rows() -> Iterator[Row]:
        seen = 0
        for batch in pf.iter_batches(batch_size=1024):
            if seen + batch.num_rows <= skip:
                seen += batch.num_rows
                continue
            start = max(0, skip - seen)
            for j, value in enumerate(batch.to_pylist()[start:], seen + start + 1):
                yield Row(path, j, value)
            seen += batch.num_rows

    return RowFile(path, "parquet", pf.metadata.num_rows, rows())
