"""Which files a source names and what format each is: globs, extensions, magic bytes.

A file whose first bytes say another format than its extension (a gzip named .jsonl, JSON text
named .parquet) is a RowError(wrong_format) that names what it really is.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from rmspec.rows.errors import FORMAT_BY_SUFFIX, FORMAT_NAMES, MAGIC, NO_MATCH, WRONG_FORMAT, RowError


def resolve_paths(patterns: list[str], base_dir: Path) -> list[str]:
    """Files for each path or glob (relative to `base_dir`; `**` recurses); regular files only: a
    FIFO or a device matched by a glob would block the read or never end. A pattern matching
    nothing raises RowError(no_match, field=f"paths[{i}]")."""
    found: list[str] = []
    for i, pattern in enumerate(patterns):
        full = pattern if os.path.isabs(pattern) else str(base_dir / pattern)
        matches = (
            sorted(m for m in glob.glob(full, recursive=True) if os.path.isfile(m))
            if glob.has_magic(full)
            else ([full] if os.path.isfile(full) else [])
        )
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
    expected = (
        "JSON Lines"
        if fmt == "jsonl" or (fmt == "json" and path.lower().endswith((".jsonl", ".ndjson")))
        else FORMAT_NAMES[fmt]
    )
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


def count_lines(path: str | Path) -> int:
    """Lines of a file (a last line without a newline counts)."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")
