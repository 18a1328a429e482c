"""`kind: files` sources: local JSON Lines, JSON, CSV or Parquet files (paths or globs).

Paths, formats and the guards (magic bytes of another format, empty files, bytes that do not
decode, bare `null` lines) come from the one row reader, rmspec.rows; its RowErrors become
DataErrors here, located at the spec field. Files go to `datasets`' builders (fast, Arrow);
JSON Lines that the builder cannot or must not read are read line by line (rmspec.data.hand_read),
so that only the bad lines leave, as rejects.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rmspec import rows
from rmspec.data.hand_read import json_lines_by_hand
from rmspec.data.tool_store import arrow_typed_arguments
from rmspec.errors import DataError

FORMAT_NAMES = rows.FORMAT_NAMES


def resolve_paths(patterns: list[str], base_dir: Path, where: str) -> list[str]:
    """Files for each path or glob (relative to the spec file); a pattern matching nothing is an error."""
    try:
        return rows.resolve_paths(patterns, base_dir)
    except rows.RowError as exc:
        raise DataError(
            f"{where}.{exc.field}: {exc.detail}",
            "paths are relative to the spec file's folder; check the name, or use a glob such as data/*.jsonl",
        ) from None


def _format(paths: list[str], declared: str, where: str) -> str:
    """One format for all the files: the declared one, or the one their extensions say."""
    if declared != "auto":
        return declared
    # .jsonl and .json go to the same builder (JSON): one source may mix them.
    fmts = {"json" if f == "jsonl" else f for f in (rows.format_of(p) for p in paths)}
    if None in fmts or len(fmts) != 1:
        suffixes = sorted({Path(p).suffix or "(none)" for p in paths})
        raise DataError(
            f"{where}: cannot tell the file format from the extension(s) {', '.join(suffixes)}",
            "set format: json, jsonl, parquet or csv, and keep one format per source",
        )
    fmt = fmts.pop()
    assert fmt is not None  # refused above
    return fmt


def files_source(source: Any, base_dir: Path, where: str) -> Any:
    import datasets

    paths = resolve_paths(source.paths, base_dir, where)
    fmt = _format(paths, source.format, where)
    builder = "json" if fmt in ("json", "jsonl") else fmt
    encoding = getattr(source, "encoding", "utf-8") or "utf-8"
    check_files(paths, fmt, where)
    by_hand_ok = builder == "json" and all(rows.is_json_lines(p) for p in paths) and rows.line_safe(encoding)
    kwargs = {}
    if builder in ("json", "csv"):
        kwargs["encoding"] = encoding
        bad = next(((p, b) for p in paths if (b := rows.first_undecodable(p, encoding)) is not None), None)
        if bad is not None:
            if by_hand_ok:
                return json_lines_by_hand(paths, encoding, where)  # only the bad rows leave, as `encoding` rejects
            path, (line, col, detail) = bad
            raise DataError(
                f"{where}: {path}:{line}:{col}: not {encoding} text: {detail}",
                "set data.source.encoding to the file's encoding (e.g. latin-1 or cp1252), or convert "
                "the file to UTF-8",
            )
    if builder == "json":
        nulls = [(p, n) for p in paths if (n := rows.bare_null_line(p)) is not None]
        if nulls:  # pyarrow's JSON reader dies with SIGSEGV on such a line (pyarrow 26): never hand it one
            if by_hand_ok:
                return json_lines_by_hand(paths, encoding, where)  # the null line leaves as invalid_json
            path, line = nulls[0]
            raise DataError(
                f"{where}: {path}:{line}: a bare null where a row (a JSON object) belongs",
                "remove the null entries, or write the rows as JSON Lines (one object per line)",
            )
    try:
        with _builder_quiet():
            ds = datasets.load_dataset(builder, data_files=paths, split="train", **kwargs)
    except Exception as exc:  # the builders raise many types; all mean "this file is not that format"
        if by_hand_ok:
            return json_lines_by_hand(paths, encoding, where)  # a broken line: read line by line, reject only that line
        raise DataError(
            f"{where}: could not read {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''} as {FORMAT_NAMES[fmt]}"
            f"{' (the format its extension says)' if source.format == 'auto' else ''}: {short(exc)}",
            f"check that the files are valid {FORMAT_NAMES[fmt]}, or set format: to what they are",
        ) from None
    # A column with mixed types (text in one row, a number in another): datasets stores such
    # values as JSON and reads the text "4" back as the number 4. Read these files by hand.
    if by_hand_ok and any(isinstance(f, datasets.Json) for f in ds.features.values()):
        return json_lines_by_hand(paths, encoding, where)
    # Tool call arguments that Arrow typed as one struct for all rows (missing keys filled with null,
    # ints widened to floats) would render arguments the file never had: read them as written.
    if by_hand_ok and arrow_typed_arguments(ds.features):
        return json_lines_by_hand(paths, encoding, where)
    return ds


@contextmanager
def _builder_quiet() -> Iterator[None]:
    """The JSON builder logs its own parse error (0-based row, pyarrow's wording) before raising; the
    exception is handled here (a line-by-line read, or a located DataError), so its log line would only
    contradict rmspec's message on the console."""
    logger = logging.getLogger("datasets.packaged_modules.json.json")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def check_files(paths: list[str], fmt: str, where: str) -> None:
    """An empty file, or one that is another format than expected, is a DataError naming it."""
    empty = []
    for path in paths:
        try:
            rows.check_magic(path, fmt)
        except rows.RowError as exc:
            hint = (
                (
                    "rename it, or set format: to what it is"
                    if exc.field == "Parquet"
                    else "decompress or convert it to JSON Lines, CSV or Parquet"
                )
                if exc.detail.startswith("is a ")
                else "rename it to what it is (.jsonl, .json, .csv), or set format: to what it is"
            )
            raise DataError(f"{where}: {exc}", hint) from None
        if rows.is_blank(path):
            empty.append(path)
    if empty and len(empty) == len(paths):
        raise DataError(
            f"{where}: {', '.join(empty[:3])}{' ...' if len(empty) > 3 else ''} "
            f"{'is' if len(empty) == 1 else 'are'} empty: no rows to read",
            "point data.source.paths at the file that holds the data (was it written completely?)",
        )


def short(exc: Exception, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + " ..."
