"""JSON Lines read line by line (rmspec.rows), for files `datasets`' JSON builder must not be given:
a line that is not JSON, not text in the source's encoding, or a bare `null` (which crashes
pyarrow). Only the bad lines leave, as rejects; the others are rows.

Rows read by hand carry every value JSON-encoded, so that no value changes type on the way;
the pipeline decodes them (`decode_row`). A line that cannot be read becomes a row that holds
only BAD_LINE ([reason, detail]), and leaves as a reject (invalid_json, encoding) instead of
failing the whole file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

from rmspec import rows
from rmspec.errors import DataError

ENCODED_MARK = "rmspec:json-encoded-columns"
BAD_LINE = "__rmspec_bad_line__"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _read(path: str, encoding: str) -> Iterator[tuple[int, dict[str, Any] | None, tuple[str, str] | None]]:
    """(line number, row or None, (reason, detail) or None) for each non-blank line."""
    for number, text, problem in rows.decoded_lines(path, encoding):
        if problem is not None:
            yield (
                number,
                None,
                ("encoding", f"{problem.detail}; set data.source.encoding if the file is in another encoding"),
            )
            continue
        assert text is not None  # decoded_lines gives a text or a problem
        try:
            row = rows.parse_line(text)
        except rows.RowError as exc:
            yield number, None, ("encoding" if exc.code == rows.LONE_SURROGATE else "invalid_json", exc.detail)
            continue
        # Arrow cuts a column name at a NUL: such a key would break the table, so the NUL is replaced.
        if any("\x00" in key for key in row):
            row = {key.replace("\x00", "\ufffd"): value for key, value in row.items()}
        yield number, row, None


def json_lines_by_hand(paths: list[str], encoding: str = "utf-8", where: str = "data.source") -> Any:
    import datasets

    columns: dict[str, None] = {}
    good, bad, first_bad = 0, 0, None
    for path in paths:
        for number, row, problem in _read(path, encoding):
            if problem is not None:
                bad += 1
                first_bad = first_bad or f"{path}:{number}: {_short(problem[1], 160)}"
                continue
            good += 1
            assert row is not None  # _read gives a row or a problem
            columns.update(dict.fromkeys(row))
    if good == 0:
        if bad == 0:
            raise DataError(
                f"{where}: {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''} holds no rows",
                "point data.source.paths at the file that holds the data",
            )
        expected_from = "the extension" if all(p.endswith(".jsonl") for p in paths) else "format: json"
        raise DataError(
            f"{where}: not one of {bad:,} lines could be read as JSON Lines (one JSON object per line), "
            f"the format expected from {expected_from}; "
            f"first: {first_bad}",
            "check the file is JSON Lines text; if it is one JSON array name it .json, and for CSV or "
            "Parquet set format: csv or parquet (or use the matching extension)",
        )
    names = [*columns, BAD_LINE]
    features = datasets.Features({c: datasets.Value("string") for c in names})
    stamp = _hash_files(paths) + encoding
    ds = datasets.Dataset.from_generator(
        _encoded_rows,
        gen_kwargs={"paths": tuple(paths), "names": tuple(names), "encoding": encoding},
        features=features,
        fingerprint=stamp,
    )
    ds.info.description = ENCODED_MARK
    return ds


def _encoded_rows(paths: tuple[str, ...], names: tuple[str, ...], encoding: str = "utf-8"):
    for path in paths:
        for number, row, problem in _read(path, encoding):
            if problem is not None:
                reason, detail = problem
                bad = json.dumps([reason, f"{path}:{number}: {_short(detail, 300)}"])
                yield {**dict.fromkeys(names), BAD_LINE: bad}
                continue
            assert row is not None  # _read gives a row or a problem
            yield {**{n: json.dumps(row[n]) if n in row else None for n in names}, BAD_LINE: None}


def is_encoded(ds: Any) -> bool:
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
