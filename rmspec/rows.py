"""The one reader of row files (JSON Lines, JSON, CSV, Parquet): format, encoding, guards, rows.

Every package that reads rows from a file goes through here (data sources, `rmspec score`, the
planner's estimate, `annotate export`, the benchmarks): a guard added after a fuzzer finding
then holds for all of them. Problems are a `RowError` (code, detail, file, line, col, field);
each caller maps it to its own outcome (a DataError and exit 2, a rejected row with a reason,
"cannot count").

One rule for formats, everywhere: by extension `.jsonl`/`.ndjson` (JSON Lines), `.json` (a JSON
array, a `{"data": [...]}` object, or JSON Lines if its first byte is `{`), `.csv`, `.parquet`/`.pq`.
`format: json` (declared) means the same as the `.json` extension. The first bytes of a file
that is another format (Parquet, gzip, zip, Arrow, SQLite) are an error that names what it is.

Standard library only: the planner (light side) imports it; pyarrow is imported inside the
Parquet branch only.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("jsonl", "json", "csv", "parquet")
FORMAT_BY_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv",
                    ".parquet": "parquet", ".pq": "parquet"}
FORMAT_NAMES = {"json": "JSON", "jsonl": "JSON Lines", "parquet": "Parquet", "csv": "CSV"}
# The first bytes of formats a data folder holds, to say what a misnamed file really is.
MAGIC = {b"PAR1": "Parquet", b"\x1f\x8b": "gzip", b"PK\x03\x04": "zip", b"ARROW1": "Arrow",
         b"SQLite format 3": "SQLite"}

# Codes of RowError. Document-level ones are raised by `open_rows`; row-level ones come with a Row.
NOT_FOUND, NO_MATCH, UNKNOWN_FORMAT, WRONG_FORMAT = "not_found", "no_match", "unknown_format", "wrong_format"
ENCODING, BARE_NULL, NOT_ARRAY, UNREADABLE = "encoding", "bare_null", "not_array", "unreadable"
INVALID_JSON, NOT_OBJECT, LONE_SURROGATE, EMPTY_LINE = "invalid_json", "not_object", "lone_surrogate", "empty_line"


class RowError(ValueError):
    """What is wrong, where: `code` (one of the constants above), `detail` (a sentence), `file`,
    `line` and `col` (1-based, when known), `field` (the spec field or row field at fault),
    `msg` (for invalid_json: the parser's short message, `col` its column)."""

    def __init__(self, code: str, detail: str, file: str = "", line: int | None = None, col: int | None = None,
                 field: str | None = None, msg: str | None = None):
        self.code, self.detail, self.file, self.line, self.col, self.field = code, detail, str(file), line, col, field
        self.msg = msg if msg is not None else detail
        joint = " " if detail.startswith("is ") else ": "  # "data.jsonl is a gzip file, ..."
        super().__init__(f"{self.where}{joint}{detail}" if self.where else detail)

    @property
    def where(self) -> str:
        return ":".join(str(x) for x in (self.file, self.line, self.col) if x not in (None, ""))


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


# ---------------------------------------------------------------- paths and formats


def resolve_paths(patterns: list[str], base_dir: Path) -> list[str]:
    """Files for each path or glob (relative to `base_dir`; `**` recurses); regular files only: a
    FIFO or a device matched by a glob would block the read or never end. A pattern matching
    nothing raises RowError(no_match, field=f"paths[{i}]")."""
    found: list[str] = []
    for i, pattern in enumerate(patterns):
        full = pattern if os.path.isabs(pattern) else str(base_dir / pattern)
        matches = (sorted(m for m in glob.glob(full, recursive=True) if os.path.isfile(m)) if glob.has_magic(full)
                   else ([full] if os.path.isfile(full) else []))
        if not matches:
            raise RowError(NO_MATCH, f"no file matches {pattern!r} (looked for {full})", field=f"paths[{i}]")
        found.extend(matches)
    return found


def format_of(path: str | Path, declared: str = "auto") -> str | None:
    """The format of `path`: the declared one, else its extension's; None when neither says."""
    if declared and declared != "auto":
        return declared
    return FORMAT_BY_SUFFIX.get(Path(path).suffix.lower())


def sniff(path: str | Path) -> str | None:
    """The name of the format whose magic bytes the file starts with (Parquet, gzip, ...), or None."""
    with open(path, "rb") as fh:
        head = fh.read(64)
    return next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)


def check_magic(path: str | Path, fmt: str) -> None:
    """RowError(wrong_format) when the file's first bytes say another format than `fmt`, or when a
    Parquet file lacks Parquet's magic bytes."""
    path = str(path)
    found = sniff(path)
    expected = "JSON Lines" if fmt == "jsonl" or (fmt == "json" and path.lower().endswith((".jsonl", ".ndjson"))) \
        else FORMAT_NAMES[fmt]
    says = "extension" if Path(path).suffix.lower() in FORMAT_BY_SUFFIX else "format"
    if found is not None and found != expected:
        raise RowError(WRONG_FORMAT, f"is a {found} file, not {expected} as its {says} says", path, field=found)
    if expected == "Parquet" and found is None and not is_blank(path):
        with open(path, "rb") as fh:
            head = fh.read(64)
        looks = "JSON text" if head.lstrip()[:1] in (b"{", b"[") else "not Parquet (no PAR1 magic bytes)"
        raise RowError(WRONG_FORMAT, f"is {looks}, not Parquet as its {says} says", path, field=looks)


def is_blank(path: str | Path) -> bool:
    """Nothing but whitespace (read until the first other byte, so a normal file costs one read)."""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 16):
            if chunk.strip():
                return False
    return True


def is_json_lines(path: str | Path) -> bool:
    """A .jsonl/.ndjson file, or one whose first byte (after blanks and a BOM) is `{`."""
    if str(path).lower().endswith((".jsonl", ".ndjson")):
        return True
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
    return head == b"{"


# ---------------------------------------------------------------- encoding and bare nulls


def line_safe(encoding: str) -> bool:
    """Whether lines can be split on the byte \\n before decoding (not so for UTF-16/32)."""
    return "\n".encode(encoding) == b"\n" and "{".encode(encoding) == b"{"


def line_blocks(path: str | Path, size: int = 1 << 22) -> Iterator[tuple[int, bytes]]:
    """(number of the block's first line, block) over the file in blocks of about `size` bytes cut
    at line ends: one pass at memory speed, whatever the file's size."""
    line, rest = 1, b""
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(size)
            data = rest + chunk
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            block, rest = data[:cut], data[cut:]
            yield line, block
            line += block.count(b"\n")
            if not chunk:
                return


def first_undecodable(path: str | Path, encoding: str = "utf-8") -> tuple[int, int, str] | None:
    """(line, column, what) of the first bytes that do not decode, or None. Reads in large blocks
    cut at line ends, so a valid file costs one pass at memory speed."""
    if not line_safe(encoding):  # UTF-16/32: decode as a text stream, locate by line
        number = 0
        try:
            with open(path, encoding=encoding) as fh:
                for _line in fh:
                    number += 1
        except UnicodeDecodeError as exc:
            return number + 1, 1, f"the bytes do not decode as {encoding} ({exc.reason})"
        return None
    for line, block in line_blocks(path):
        try:
            block.decode(encoding)
        except UnicodeDecodeError as exc:
            row_start = block.rfind(b"\n", 0, exc.start) + 1
            line += block.count(b"\n", 0, exc.start)
            col = len(block[row_start:exc.start].decode(encoding, errors="replace")) + 1
            return line, col, f"byte 0x{block[exc.start]:02x} does not decode as {encoding} ({exc.reason})"
    return None


# A line start is searched as a literal "\n" (5x faster than a (?m)^ pattern: 58 MB in 0.35 s).
_BARE_NULL = re.compile(rb"\n[ \t\r]*null[ \t\r]*(?:\n|$)")


def bare_null_line(path: str | Path) -> int | None:
    """The line number of the first line that is just `null`, or None.

    pyarrow's JSON reader (26.0.1, under datasets' json builder) crashes the process with SIGSEGV
    when a block it parses starts with such a line: found by tests/fuzz, a file whose first line is
    `null` killed `rmspec data report`. Check before handing a JSON file to pyarrow (`preflight`).
    Blocks of 4 MiB cut at line ends, scanned by a regex."""
    for line, block in line_blocks(path):
        found = _BARE_NULL.search(b"\n" + block)  # the "\n" stands for the line start before the block
        if found:
            return line + block.count(b"\n", 0, found.start())
    return None


def preflight(path: str | Path, fmt: str, encoding: str = "utf-8") -> None:
    """The guards for a file about to be read by another reader (datasets / pyarrow): magic bytes
    of another format, bytes that do not decode (JSON, CSV), a bare `null` line (JSON), which
    would crash pyarrow. Raises the first RowError found."""
    check_magic(path, fmt)
    if fmt in ("json", "jsonl", "csv"):
        bad = first_undecodable(path, encoding)
        if bad is not None:
            line, col, detail = bad
            raise RowError(ENCODING, f"not {encoding} text: {detail}", str(path), line, col)
    if fmt in ("json", "jsonl"):
        null = bare_null_line(path)
        if null is not None:
            raise RowError(BARE_NULL, "a bare null where a row (a JSON object) belongs", str(path), null)


# ---------------------------------------------------------------- one line of JSON


def decoded_lines(path: str | Path, encoding: str = "utf-8", *,
                  blanks: bool = False) -> Iterator[tuple[int, str | None, RowError | None]]:
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
                col = len(raw[:exc.start].decode(encoding, errors="replace")) + 1
                yield number, None, RowError(ENCODING, f"byte 0x{raw[exc.start]:02x} at column {col} does not decode "
                                             f"as {encoding} ({exc.reason})", str(path), number, col,
                                             msg=raw[:2000].decode(encoding, errors="replace"))


def parse_line(text: str, file: str = "", line: int | None = None) -> dict[str, Any]:
    """One JSON object; RowError invalid_json (bad JSON or nesting too deep), not_object, or
    lone_surrogate (valid JSON, but an escaped lone surrogate is not Unicode text)."""
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RowError(INVALID_JSON, str(exc), file, line, exc.colno, msg=exc.msg) from None
    except RecursionError as exc:  # thousands of nested brackets
        raise RowError(INVALID_JSON, str(exc), file, line) from None
    if not isinstance(row, dict):
        raise RowError(NOT_OBJECT, f"a JSON {type(row).__name__}, not an object", file, line)
    if "\\ud" in text.lower():  # an escaped surrogate: valid JSON, but a lone one cannot be stored as text
        try:
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RowError(LONE_SURROGATE, f"a lone surrogate {exc.object[exc.start]!r} is not Unicode text",
                           file, line) from None
    return row


# ---------------------------------------------------------------- rows


def open_rows(path: str | Path, fmt: str = "auto", *, encoding: str = "utf-8", skip: int = 0,
              blanks: bool = False) -> RowFile:
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
        raise RowError(UNKNOWN_FORMAT, f"cannot tell the format from the name {Path(path).name!r}"
                       if kind is None else f"unknown format {kind!r}", path, field="format")
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


def count_lines(path: str | Path) -> int:
    """Lines of a file (a last line without a newline counts)."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


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
        raise RowError(INVALID_JSON, f"not valid JSON ({exc.msg})", path, exc.lineno, exc.colno, msg=exc.msg) from None
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
