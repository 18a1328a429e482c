"""Where the rows come from: one `datasets` object per `data.source` (or `split.validation_source`).

Every source gives back a `datasets.Dataset` (memory-mapped Arrow on disk) or, for a streaming
hub source, a `datasets.IterableDataset`; `limit` is applied here. Problems a user can fix (a
missing file, a bad query, a gated dataset without a token) are `DataError`s that say where and
how.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from rmspec.errors import DataError

FORMAT_BY_SUFFIX = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def open_source(source: Any, base_dir: Path, *, limit: int | None = None, where: str = "data.source"):
    """Rows of one spec source; `limit` (the smaller of the spec's and the caller's) caps them."""
    cap = min(x for x in (limit, getattr(source, "limit", None), float("inf")) if x is not None)
    cap = None if cap == float("inf") else int(cap)
    kind = source.kind
    if kind == "files":
        ds = _files(source, base_dir, where)
    elif kind == "disk":
        ds = _disk(source, base_dir, where)
    elif kind == "huggingface":
        ds = _huggingface(source, base_dir, where)
    elif kind == "sql":
        ds = _sql(source, base_dir, where)
    else:
        ds = _custom(source, base_dir, where)
    return _take(ds, cap)


def _take(ds, cap: int | None):
    import datasets

    if cap is None:
        return ds
    if isinstance(ds, datasets.IterableDataset):
        return ds.take(cap)
    return ds.select(range(min(cap, len(ds))))


# ---------------------------------------------------------------- files


def resolve_paths(patterns: list[str], base_dir: Path, where: str) -> list[str]:
    """Files for each path or glob (relative to the spec file); a pattern matching nothing is an error."""
    found: list[str] = []
    for i, pattern in enumerate(patterns):
        full = pattern if os.path.isabs(pattern) else str(base_dir / pattern)
        # Regular files only: a FIFO or a device matched by a glob would block the read or never end.
        matches = (sorted(m for m in glob.glob(full, recursive=True) if os.path.isfile(m)) if glob.has_magic(full)
                   else ([full] if os.path.isfile(full) else []))
        if not matches:
            raise DataError(
                f"{where}.paths[{i}]: no file matches {pattern!r} (looked for {full})",
                "paths are relative to the spec file's folder; check the name, or use a glob such as data/*.jsonl",
            )
        found.extend(matches)
    return found


def _files(source, base_dir: Path, where: str):
    import datasets

    paths = resolve_paths(source.paths, base_dir, where)
    fmt = source.format
    if fmt == "auto":
        fmts = {FORMAT_BY_SUFFIX.get(Path(p).suffix.lower()) for p in paths}
        if None in fmts or len(fmts) != 1:
            suffixes = sorted({Path(p).suffix or "(none)" for p in paths})
            raise DataError(
                f"{where}: cannot tell the file format from the extension(s) {', '.join(suffixes)}",
                "set format: json, jsonl, parquet or csv, and keep one format per source",
            )
        fmt = fmts.pop()
    builder = "json" if fmt in ("json", "jsonl") else fmt
    encoding = getattr(source, "encoding", "utf-8") or "utf-8"
    _check_files(paths, fmt, where)
    kwargs = {}
    if builder in ("json", "csv"):
        kwargs["encoding"] = encoding
        bad = next(((p, b) for p in paths if (b := first_undecodable(p, encoding)) is not None), None)
        if bad is not None:
            if builder == "json" and all(_is_json_lines(p) for p in paths) and _line_safe(encoding):
                return _json_lines_by_hand(paths, encoding, where)  # only the bad rows leave, as `encoding` rejects
            path, (line, col, detail) = bad
            raise DataError(f"{where}: {path}:{line}:{col}: not {encoding} text: {detail}",
                            "set data.source.encoding to the file's encoding (e.g. latin-1 or cp1252), or convert "
                            "the file to UTF-8")
    if builder == "json":
        nulls = [(p, n) for p in paths if (n := bare_null_line(p)) is not None]
        if nulls:  # pyarrow's JSON reader dies with SIGSEGV on such a line (pyarrow 26): never hand it one
            if all(_is_json_lines(p) for p in paths) and _line_safe(encoding):
                return _json_lines_by_hand(paths, encoding, where)  # the null line leaves as invalid_json
            path, line = nulls[0]
            raise DataError(f"{where}: {path}:{line}: a bare null where a row (a JSON object) belongs",
                            "remove the null entries, or write the rows as JSON Lines (one object per line)")
    try:
        ds = datasets.load_dataset(builder, data_files=paths, split="train", **kwargs)
    except Exception as exc:  # the builders raise many types; all mean "this file is not that format"
        if builder == "json" and all(_is_json_lines(p) for p in paths) and _line_safe(encoding):
            return _json_lines_by_hand(paths, encoding, where)  # a broken line: read line by line, reject only that line
        raise DataError(
            f"{where}: could not read {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''} as {FORMAT_NAMES[fmt]}"
            f"{' (the format its extension says)' if source.format == 'auto' else ''}: {_short(exc)}",
            f"check that the files are valid {FORMAT_NAMES[fmt]}, or set format: to what they are",
        ) from None
    if builder == "json" and any(isinstance(f, datasets.Json) for f in ds.features.values()):
        # A column with mixed types (text in one row, a number in another): datasets stores such
        # values as JSON and reads the text "4" back as the number 4. Read these files by hand.
        if all(_is_json_lines(p) for p in paths) and _line_safe(encoding):
            return _json_lines_by_hand(paths, encoding, where)
    return ds


FORMAT_NAMES = {"json": "JSON", "jsonl": "JSON Lines", "parquet": "Parquet", "csv": "CSV"}
# The first bytes of formats a data folder holds, to say what a misnamed file really is.
MAGIC = {b"PAR1": "Parquet", b"\x1f\x8b": "gzip", b"PK\x03\x04": "zip", b"ARROW1": "Arrow", b"SQLite format 3": "SQLite"}


def _check_files(paths: list[str], fmt: str, where: str) -> None:
    """An empty file, or one that is another format than expected, is a DataError naming it."""
    empty = []
    for path in paths:
        with open(path, "rb") as fh:
            head = fh.read(64)
        found = next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)
        expected = "JSON Lines" if fmt == "json" and path.lower().endswith(".jsonl") else FORMAT_NAMES[fmt]
        if found is not None and found != expected:
            raise DataError(f"{where}: {path} is a {found} file, not {expected} as its "
                            f"{'extension' if Path(path).suffix.lower() in FORMAT_BY_SUFFIX else 'format'} says",
                            "rename it, or set format: to what it is" if found == "Parquet" else
                            "decompress or convert it to JSON Lines, CSV or Parquet")
        if _is_blank(path):
            empty.append(path)
        elif expected == "Parquet" and found is None:
            looks = "JSON text" if head.lstrip()[:1] in (b"{", b"[") else "not Parquet (no PAR1 magic bytes)"
            raise DataError(f"{where}: {path} is {looks}, not Parquet as its "
                            f"{'extension' if path.lower().endswith('.parquet') else 'format'} says",
                            "rename it to what it is (.jsonl, .json, .csv), or set format: to what it is")
    if empty and len(empty) == len(paths):
        raise DataError(f"{where}: {', '.join(empty[:3])}{' ...' if len(empty) > 3 else ''} "
                        f"{'is' if len(empty) == 1 else 'are'} empty: no rows to read",
                        "point data.source.paths at the file that holds the data (was it written completely?)")


def _is_blank(path: str) -> bool:
    """Nothing but whitespace (read until the first other byte, so a normal file costs one read)."""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 16):
            if chunk.strip():
                return False
    return True


def _line_safe(encoding: str) -> bool:
    """Whether lines can be split on the byte \\n before decoding (not so for UTF-16/32)."""
    return "\n".encode(encoding) == b"\n" and "{".encode(encoding) == b"{"


def first_undecodable(path: str, encoding: str) -> tuple[int, int, str] | None:
    """(line, column, what) of the first bytes that do not decode, or None. Reads in large blocks
    cut at line ends, so a valid file costs one pass at memory speed."""
    if not _line_safe(encoding):  # UTF-16/32: decode as a text stream, locate by line
        number = 0
        try:
            with open(path, encoding=encoding) as fh:
                for number, _ in enumerate(fh, 1):
                    pass
        except UnicodeDecodeError as exc:
            return number + 1, 1, f"the bytes do not decode as {encoding} ({exc.reason})"
        return None
    for line, block in _line_blocks(path):
        try:
            block.decode(encoding)
        except UnicodeDecodeError as exc:
            row_start = block.rfind(b"\n", 0, exc.start) + 1
            line += block.count(b"\n", 0, exc.start)
            col = len(block[row_start:exc.start].decode(encoding, errors="replace")) + 1
            return line, col, f"byte 0x{block[exc.start]:02x} does not decode as {encoding} ({exc.reason})"
    return None


def _line_blocks(path: str, size: int = 1 << 22):
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


# A line start is searched as a literal "\n" (5x faster than a (?m)^ pattern: 58 MB in 0.35 s).
_BARE_NULL = re.compile(rb"\n[ \t\r]*null[ \t\r]*(?:\n|$)")


def bare_null_line(path: str) -> int | None:
    """The line number of the first line that is just `null`, or None.

    pyarrow's JSON reader (26.0.1, under datasets' json builder) crashes the process with SIGSEGV
    when a block it parses starts with such a line: found by tests/fuzz, a file whose first line is
    `null` killed `rmspec data report`. Blocks of 4 MiB cut at line ends, scanned by a regex."""
    for line, block in _line_blocks(path):
        found = _BARE_NULL.search(b"\n" + block)  # the "\n" stands for the line start before the block
        if found:
            return line + block.count(b"\n", 0, found.start())
    return None


# Rows read by hand carry every value JSON-encoded, so that no value changes type on the way;
# the pipeline decodes them (see `decode_row`). A line that is not JSON, or not text in the
# source's encoding, becomes a row that holds only BAD_LINE ([reason, detail]), and leaves as a
# reject (invalid_json, encoding) instead of failing the whole file.
ENCODED_MARK = "rmspec:json-encoded-columns"
BAD_LINE = "__rmspec_bad_line__"


def _is_json_lines(path: str) -> bool:
    if path.endswith(".jsonl"):
        return True
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
    return head == b"{"


def _lines(path: str, encoding: str):
    """(line number, text or None, what went wrong) for each non-blank line, decoded one by one."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf") and encoding.replace("_", "-").lower() in ("utf-8", "utf8"):
                raw = raw[3:]  # a UTF-8 byte-order mark
            if not raw.strip():
                continue
            try:
                yield number, raw.decode(encoding), None
            except UnicodeDecodeError as exc:
                col = len(raw[:exc.start].decode(encoding, errors="replace")) + 1
                yield number, None, (f"byte 0x{raw[exc.start]:02x} at column {col} does not decode as {encoding} "
                                     f"({exc.reason}); set data.source.encoding if the file is in another encoding")


class _NotText(ValueError):
    """A line that parses as JSON but holds no valid Unicode text (a lone surrogate escape)."""


def _parse_line(text: str) -> dict:
    row = json.loads(text)
    if not isinstance(row, dict):
        raise ValueError(f"a JSON {type(row).__name__}, not an object")
    if "\\ud" in text.lower():  # an escaped surrogate: valid JSON, but a lone one cannot be stored as text
        try:
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _NotText(f"a lone surrogate {exc.object[exc.start]!r} is not Unicode text") from None
    # Arrow cuts a column name at a NUL: such a key would break the table, so the NUL is replaced.
    if any("\x00" in key for key in row):
        row = {key.replace("\x00", "\ufffd"): value for key, value in row.items()}
    return row


def _json_lines_by_hand(paths: list[str], encoding: str = "utf-8", where: str = "data.source"):
    import datasets

    columns: dict[str, None] = {}
    good, bad, first_bad = 0, 0, None
    for path in paths:
        for number, text, problem in _lines(path, encoding):
            try:
                if problem is not None:
                    raise ValueError(problem)
                row = _parse_line(text)
            except (ValueError, RecursionError) as exc:
                bad += 1
                first_bad = first_bad or f"{path}:{number}: {_short(exc, 160)}"
                continue
            good += 1
            columns.update(dict.fromkeys(row))
    if good == 0:
        if bad == 0:
            raise DataError(f"{where}: {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''} holds no rows",
                            "point data.source.paths at the file that holds the data")
        raise DataError(f"{where}: not one of {bad:,} lines could be read as JSON Lines (one JSON object per line), "
                        f"the format expected from {'the extension' if all(p.endswith('.jsonl') for p in paths) else 'format: json'}; "
                        f"first: {first_bad}",
                        "check the file is JSON Lines text; if it is one JSON array name it .json, and for CSV or "
                        "Parquet set format: csv or parquet (or use the matching extension)")
    names = [*columns, BAD_LINE]
    features = datasets.Features({c: datasets.Value("string") for c in names})
    stamp = _hash_files(paths) + encoding
    ds = datasets.Dataset.from_generator(_encoded_rows, gen_kwargs={"paths": tuple(paths), "names": tuple(names),
                                                                    "encoding": encoding},
                                         features=features, fingerprint=stamp)
    ds.info.description = ENCODED_MARK
    return ds


def _encoded_rows(paths: tuple[str, ...], names: tuple[str, ...], encoding: str = "utf-8"):
    for path in paths:
        for number, text, problem in _lines(path, encoding):
            if problem is not None:
                yield {**dict.fromkeys(names), BAD_LINE: json.dumps(["encoding", f"{path}:{number}: {problem}"])}
                continue
            try:
                row = _parse_line(text)
            except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested brackets
                reason = "encoding" if isinstance(exc, _NotText) else "invalid_json"
                yield {**dict.fromkeys(names), BAD_LINE: json.dumps([reason, f"{path}:{number}: {_short(exc, 300)}"])}
                continue
            yield {**{n: json.dumps(row[n]) if n in row else None for n in names}, BAD_LINE: None}


def is_encoded(ds) -> bool:
    return getattr(getattr(ds, "info", None), "description", None) == ENCODED_MARK


def decode_row(row: dict) -> dict:
    """Undo the encoding of hand-read rows; a line that was not readable raises a Reject with its
    reason (invalid_json, encoding) and its file:line."""
    if row.get(BAD_LINE):
        from rmspec.data.records import Reject

        reason, detail = json.loads(row[BAD_LINE])
        raise Reject(reason, detail)
    return {k: json.loads(v) for k, v in row.items() if k != BAD_LINE and v is not None}


def _hash_files(paths: list[str]) -> str:
    stamps = [f"{p}:{os.path.getsize(p)}:{os.stat(p).st_mtime_ns}" for p in paths]
    return hashlib.sha256("\n".join(stamps).encode()).hexdigest()[:32]


# ---------------------------------------------------------------- disk


def _disk(source, base_dir: Path, where: str):
    import datasets

    path = Path(source.path)
    path = path if path.is_absolute() else base_dir / path
    if not path.is_dir():
        raise DataError(f"{where}.path: no directory {path}", "give a folder written by datasets' save_to_disk")
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:
        raise DataError(f"{where}.path: {path} is not a save_to_disk folder: {_short(exc)}",
                        "write it with Dataset.save_to_disk or DatasetDict.save_to_disk") from None
    if isinstance(loaded, datasets.DatasetDict):
        if source.split is None:
            raise DataError(f"{where}: {path} holds several splits ({', '.join(loaded)})",
                            f"name one with split: (one of {', '.join(loaded)})")
        if source.split not in loaded:
            raise DataError(f"{where}.split: no split {source.split!r} in {path}", f"choose one of {', '.join(loaded)}")
        return loaded[source.split]
    return loaded


# ---------------------------------------------------------------- hub


def _huggingface(source, base_dir: Path, where: str):
    import datasets

    token = None
    if source.token_env:
        token = os.environ.get(source.token_env)
        if not token:
            raise DataError(f"{where}.token_env: the environment variable {source.token_env} is not set",
                            f"export {source.token_env}=<your hub token> (a read token from huggingface.co/settings/tokens)")
    path = source.path
    local = base_dir / path
    if not os.path.isabs(path) and local.exists():  # a local copy or dataset folder next to the spec
        path = str(local)
    try:
        return datasets.load_dataset(path, name=source.name, data_dir=source.data_dir, split=source.split,
                                     revision=source.revision, streaming=source.streaming, token=token)
    except Exception as exc:
        offline = os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = ("the hub is not reachable (offline mode): download the data where the hub is reachable, "
                "save it with save_to_disk or as JSONL, and point the spec at it with kind: disk or kind: files"
                if offline or "offline" in str(exc).lower() or "connect" in str(exc).lower()
                else "check the dataset id, config name (name:), data_dir and split; gated datasets need token_env")
        raise DataError(f"{where}: could not load {source.path!r} split {source.split!r}: {_short(exc)}", hint) from None


# ---------------------------------------------------------------- sql


def sql_url(source, base_dir: Path, where: str) -> str:
    """The SQLAlchemy URL, with the password taken from the environment variable the spec names."""
    from sqlalchemy.engine import make_url

    if source.sqlite is not None:
        path = Path(source.sqlite)
        path = path if path.is_absolute() else base_dir / path
        if not path.is_file():
            raise DataError(f"{where}.sqlite: no SQLite file {path}", "the path is relative to the spec file's folder")
        return f"sqlite:///{path}"
    try:
        url = make_url(source.url)
    except Exception as exc:
        raise DataError(f"{where}.url: not an SQLAlchemy URL: {_short(exc)}",
                        "write it as dialect+driver://user@host:port/database") from None
    if source.password_env:
        password = os.environ.get(source.password_env)
        if password is None:
            raise DataError(f"{where}.password_env: the environment variable {source.password_env} is not set",
                            f"export {source.password_env}=<the database password>")
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)


def _sql(source, base_dir: Path, where: str):
    import datasets
    import sqlalchemy

    url = sql_url(source, base_dir, where)
    try:
        engine = sqlalchemy.create_engine(url)
    except Exception as exc:  # e.g. a driver that is not installed
        raise DataError(f"{where}: cannot connect with {source.url or source.sqlite!r}: {_short(exc)}",
                        "install the database driver (e.g. psycopg for postgresql) and check the URL") from None
    # Probe the query first so that a typo is a located error, not a failure inside a generator.
    try:
        with engine.connect() as conn:
            columns = list(conn.execute(sqlalchemy.text(source.query)).keys())
    except Exception as exc:
        engine.dispose()
        raise DataError(f"{where}.query: the query failed: {_short(exc)}",
                        "run it in your SQL client first; it must be a SELECT returning the mapped columns") from None
    # A live database has no version to cache by; an SQLite file has its size and mtime.
    if source.sqlite is not None:
        stat = Path(url.removeprefix("sqlite:///")).stat()
        stamp = f"{stat.st_size}-{stat.st_mtime_ns}"
    else:
        stamp = os.urandom(8).hex()
    fingerprint = hashlib.sha256(f"{url}\n{source.query}\n{stamp}".encode()).hexdigest()[:32]
    try:
        return datasets.Dataset.from_generator(_sql_rows, gen_kwargs={"url": url, "query": source.query, "columns": tuple(columns)},
                                               fingerprint=fingerprint)
    finally:
        engine.dispose()


def _sql_rows(url: str, query: str, columns: tuple[str, ...]):
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True).execute(sqlalchemy.text(query))
            for chunk in result.partitions(10_000):
                for row in chunk:
                    yield dict(zip(columns, row))
    finally:
        engine.dispose()


# ---------------------------------------------------------------- custom


def _custom(source, base_dir: Path, where: str):
    """A source registered under the `rmspec.sources` entry point: a callable(options, base_dir) -> Dataset."""
    import datasets
    from importlib.metadata import entry_points

    matches = [ep for ep in entry_points(group="rmspec.sources") if ep.name == source.kind]
    if not matches:
        raise DataError(f"{where}.kind: no source {source.kind!r} is registered under the rmspec.sources entry point",
                        "install the package that provides it")
    try:
        factory = matches[0].load()
    except Exception as exc:
        raise DataError(f"{where}.kind: the source {source.kind!r} ({matches[0].value}) failed to import: {_short(exc)}",
                        "reinstall the package that provides it") from None
    ds = factory(dict(source.options), base_dir)
    if isinstance(ds, datasets.DatasetDict) or not isinstance(ds, (datasets.Dataset, datasets.IterableDataset)):
        raise DataError(f"{where}.kind: the source {source.kind!r} returned {type(ds).__name__}, not a datasets.Dataset",
                        "a custom source must return one datasets.Dataset or IterableDataset")
    return ds


def _short(exc: Exception, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + " ..."
