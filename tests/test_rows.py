"""rmspec.rows, the one reader of row files: formats, each guard, file:line per row, and the
readers built on it (data sources, `rmspec score`, the planner's estimate, `annotate export`)
giving the same rows and the same located error for the same file."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from rmspec import rows
from rmspec.errors import DataError

ROWS = [
    {"prompt": "Order a coffee.", "chosen": "café au lait", "rejected": "no"},
    {"prompt": "Say hi.", "chosen": "hi \u2603", "rejected": "bye"},
    {"prompt": "Count.", "chosen": "1 2 3", "rejected": "3 2 1"},
]


def _parquet(path: Path, data: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(data), path)
    return path


def _csv(path: Path, data: list[dict]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(data[0]))
        writer.writeheader()
        writer.writerows(data)
    return path


WRITERS = {
    "a.jsonl": lambda p: p.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8"),
    "a.ndjson": lambda p: p.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8"),
    "a.json": lambda p: p.write_text(json.dumps(ROWS, indent=1), encoding="utf-8"),
    "wrapped.json": lambda p: p.write_text(json.dumps({"data": ROWS}, indent=1), encoding="utf-8"),
    "oneline.json": lambda p: p.write_text(json.dumps({"data": ROWS}), encoding="utf-8"),
    "a.csv": lambda p: _csv(p, ROWS),
    "a.parquet": lambda p: _parquet(p, ROWS),
    "a.pq": lambda p: _parquet(p, ROWS),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_every_format_gives_the_same_rows_with_their_place(tmp_path, name):
    path = tmp_path / name
    WRITERS[name](path)
    got = list(rows.iter_rows(path))
    assert [r.value for r in got] == ROWS and all(r.error is None and r.file == str(path) for r in got)
    expected_lines = {"a.jsonl": [1, 2, 3], "a.ndjson": [1, 2, 3], "a.csv": [2, 3, 4]}.get(name, [1, 2, 3])
    assert [r.line for r in got] == expected_lines
    formats = {"a.jsonl": "jsonl", "a.ndjson": "jsonl", "a.csv": "csv", "a.parquet": "parquet", "a.pq": "parquet"}
    assert rows.open_rows(path).format == formats.get(name, "json")


def test_declared_format_wins_and_json_may_hold_lines(tmp_path):
    path = tmp_path / "rows.txt"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with pytest.raises(rows.RowError) as info:
        rows.open_rows(path)
    assert info.value.code == rows.UNKNOWN_FORMAT and info.value.file == str(path)
    assert [r.value for r in rows.iter_rows(path, "jsonl")] == ROWS
    assert [r.value for r in rows.iter_rows(path, "json")] == ROWS  # format: json on JSON Lines, as data reads it


def test_lines_are_numbered_in_the_file_and_skip_counts_rows(tmp_path):
    path = tmp_path / "gaps.jsonl"
    one, two, three = (json.dumps(r).encode() for r in ROWS)
    # A BOM, CRLF, blank lines, no final newline.
    path.write_bytes(b"\xef\xbb\xbf" + one + b"\r\n\n  \n" + two + b"\n" + three)
    assert [(r.line, r.value) for r in rows.iter_rows(path)] == [(1, ROWS[0]), (4, ROWS[1]), (5, ROWS[2])]
    assert [r.line for r in rows.iter_rows(path, skip=1)] == [4, 5]
    with_blanks = list(rows.iter_rows(path, blanks=True))
    blank = rows.EMPTY_LINE
    assert [r.error.code if r.error else "row" for r in with_blanks] == ["row", blank, blank, "row", "row"]
    assert [r.line for r in rows.iter_rows(path, blanks=True, skip=3)] == [4, 5]
    assert rows.count_lines(path) == 5


def test_bad_lines_come_as_rows_with_their_error_and_place(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(ROWS[0]), "{broken", "[1, 2]", "null", '{"p": "\\ud800"}', "[" * 100_000, json.dumps(ROWS[1])]
    path.write_text("\n".join(lines) + "\n")
    got = list(rows.iter_rows(path))
    codes = [r.error.code if r.error else None for r in got]
    assert codes == [
        None,
        rows.INVALID_JSON,
        rows.NOT_OBJECT,
        rows.NOT_OBJECT,
        rows.LONE_SURROGATE,
        rows.INVALID_JSON,
        None,
    ]
    assert [r.line for r in got] == list(range(1, 8)) and [got[0].value, got[6].value] == ROWS[:2]
    broken = got[1].error
    try:
        json.loads("{broken")
    except json.JSONDecodeError as exc:
        col = exc.colno
    assert (broken.file, broken.line, broken.col) == (str(path), 2, col) and str(broken).startswith(f"{path}:2:{col}: ")
    assert got[2].raw == "[1, 2]" and "lone surrogate" in got[4].error.detail


def test_encoding_guard_locates_the_byte(tmp_path):
    line2 = '{"prompt": "caf\u00e9"}'.encode("latin-1")
    col = line2.index(b"\xe9") + 1  # no multibyte characters before it: byte offset + 1
    jsonl = tmp_path / "latin.jsonl"
    jsonl.write_bytes(json.dumps(ROWS[0]).encode() + b"\n" + line2 + b"\n")
    got = list(rows.iter_rows(jsonl))
    assert got[0].value == ROWS[0] and got[1].error.code == rows.ENCODING
    assert (got[1].error.line, got[1].error.col) == (2, col) and "0xe9" in got[1].error.detail
    assert [r.value for r in rows.iter_rows(jsonl, encoding="latin-1")][1] == {"prompt": "caf\u00e9"}
    # A JSON document or a CSV is one document: the error is raised, at its line and column.
    for name, body in (("latin.json", b"[\n" + line2 + b"\n]"), ("latin.csv", b"prompt\n" + b"caf\xe9\n")):
        path = tmp_path / name
        path.write_bytes(body)
        with pytest.raises(rows.RowError) as info:
            rows.open_rows(path)
        assert info.value.code == rows.ENCODING and info.value.line == 2
        assert info.value.col == (col if name.endswith(".json") else 4)
    assert rows.first_undecodable(tmp_path / "latin.csv") == (
        2,
        4,
        "byte 0xe9 does not decode as utf-8 (invalid continuation byte)",
    )


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json", "rows.csv"])
def test_magic_bytes_of_another_format(tmp_path, name):
    path = _parquet(tmp_path / name, ROWS)
    with pytest.raises(rows.RowError) as info:
        rows.open_rows(path)
    expected = {"rows.jsonl": "JSON Lines", "rows.json": "JSON", "rows.csv": "CSV"}[name]
    assert info.value.code == rows.WRONG_FORMAT
    assert str(info.value) == f"{path} is a Parquet file, not {expected} as its extension says"
    zipped = tmp_path / ("z" + name)
    zipped.write_bytes(gzip.compress(b'{"a": 1}\n'))
    with pytest.raises(rows.RowError, match="is a gzip file"):
        rows.open_rows(zipped)


def test_parquet_without_its_magic(tmp_path):
    path = tmp_path / "rows.parquet"
    path.write_text(json.dumps(ROWS))
    with pytest.raises(rows.RowError) as info:
        rows.open_rows(path)
    assert info.value.code == rows.WRONG_FORMAT and "is JSON text, not Parquet" in str(info.value)
    truncated = tmp_path / "cut.parquet"
    truncated.write_bytes(_parquet(tmp_path / "whole.parquet", ROWS).read_bytes()[:40])
    with pytest.raises(rows.RowError) as info:
        rows.open_rows(truncated)
    assert info.value.code == rows.UNREADABLE


def test_empty_files(tmp_path):
    for name in ("e.jsonl", "e.csv", "e.json"):
        (tmp_path / name).write_text("  \n\n")
        assert rows.is_blank(tmp_path / name)
    assert list(rows.iter_rows(tmp_path / "e.jsonl")) == []
    assert list(rows.iter_rows(tmp_path / "e.csv")) == []
    with pytest.raises(rows.RowError) as info:  # an empty document is not valid JSON
        rows.open_rows(tmp_path / "e.json")
    assert info.value.code == rows.INVALID_JSON
    assert not rows.is_blank(_parquet(tmp_path / "p.parquet", ROWS))


def test_not_an_array_and_items_that_are_not_objects(tmp_path):
    path = tmp_path / "obj.json"
    path.write_text('"a string"')
    with pytest.raises(rows.RowError) as info:
        rows.open_rows(path)
    assert info.value.code == rows.NOT_ARRAY
    path.write_text('{"a": 1, "b": [2]}')  # one object on one line: JSON Lines of one row, as data reads it
    assert [r.value for r in rows.iter_rows(path)] == [{"a": 1, "b": [2]}]
    path.write_text(json.dumps([ROWS[0], 3, ROWS[1]]))
    got = list(rows.iter_rows(path))
    assert [r.value for r in got] == [ROWS[0], None, ROWS[1]]
    assert got[1].error.code == rows.NOT_OBJECT and got[1].line == 2


def test_bare_null_preflight(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n \tnull \n" + json.dumps(ROWS[1]) + "\n")
    assert rows.bare_null_line(path) == 2
    with pytest.raises(rows.RowError) as info:
        rows.preflight(path, "jsonl")
    assert (info.value.code, info.value.line) == (rows.BARE_NULL, 2)
    # The row reader itself reads it as a row that is not an object (it never hands it to pyarrow).
    assert [r.error.code if r.error else None for r in rows.iter_rows(path)] == [None, rows.NOT_OBJECT, None]
    path.write_text(json.dumps({"x": "null"}) + "\n")
    assert rows.bare_null_line(path) is None and rows.preflight(path, "jsonl") is None


def test_paths_recursive_globs_regular_files_only(tmp_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    for rel in ("d/a.jsonl", "d/e/b.jsonl", "c.jsonl"):
        (tmp_path / rel).write_text(json.dumps(ROWS[0]) + "\n")
    os.mkfifo(tmp_path / "d" / "pipe.jsonl")  # a FIFO matched by a glob would block the read
    found = rows.resolve_paths(["d/**/*.jsonl"], tmp_path)
    assert found == [str(tmp_path / "d/a.jsonl"), str(tmp_path / "d/e/b.jsonl")]
    assert rows.resolve_paths([str(tmp_path / "c.jsonl")], tmp_path) == [str(tmp_path / "c.jsonl")]
    with pytest.raises(rows.RowError) as info:
        rows.resolve_paths(["c.jsonl", "nothing/*.jsonl"], tmp_path)
    assert info.value.code == rows.NO_MATCH and info.value.field == "paths[1]"


def test_rows_does_not_import_heavy_modules():
    import subprocess
    import sys

    code = (
        "import sys, rmspec.rows, rmspec.plan.estimate\n"
        "print([m for m in ('torch', 'datasets', 'pyarrow', 'pandas', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------- every reader, one file


def _readers(tmp_path: Path, path: Path):
    """What each reader makes of `path`: (kind, result) where result is rows or the error text."""
    from helpers.data import make_spec
    from rmspec.annotate.source import load_source
    from rmspec.data import load_canonical
    from rmspec.plan.estimate import count_rows, sample_rows
    from rmspec.score.reader import BadRow, open_rows

    out = {}
    loaded = make_spec(tmp_path, {"source": {"kind": "files", "paths": [path.name]}, "mapping": {"preset": "pairs"}})
    try:
        kept, _ = load_canonical(loaded)
        out["data"] = [(r["prompt_messages"][-1]["content"], r["chosen"], r["rejected"]) for r in kept]
    except DataError as exc:
        out["data"] = exc.message
    try:
        got = list(open_rows(path).rows)
        out["score"] = [r.reason if isinstance(r, BadRow) else (r["prompt"], r["chosen"], r["rejected"]) for r in got]
    except DataError as exc:
        out["score"] = exc.message
    try:
        out["annotate"] = [(it["prompt"], it["first"], it["second"]) for it in load_source(path).items]
    except DataError as exc:
        out["annotate"] = exc.message
    counted, how = count_rows(loaded.spec.data.source, tmp_path)
    sampled = sample_rows(loaded.spec.data.source, tmp_path)
    out["plan"] = how if counted is None else [(r["prompt"], r["chosen"], r["rejected"]) for r in sampled or []]
    out["plan_count"] = counted
    return out


def test_every_reader_gives_the_same_rows(tmp_path):
    import datasets

    datasets.disable_progress_bars()
    # A BOM, CRLF, non-ASCII text, no final newline. (No blank line: `rmspec score` alone counts
    # one as a row, rejected as empty, so that its row numbers follow the lines.)
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(json.dumps(r, ensure_ascii=False).encode() for r in ROWS))
    expected = [(r["prompt"], r["chosen"], r["rejected"]) for r in ROWS]
    got = _readers(tmp_path, path)
    assert got == {"data": expected, "score": expected, "annotate": expected, "plan": expected, "plan_count": 3}


@pytest.mark.parametrize("hostile", ["parquet-named-jsonl", "latin1-json-array", "gzip-named-csv"])
def test_every_reader_gives_the_same_located_error(tmp_path, hostile):
    import datasets

    datasets.disable_progress_bars()
    if hostile == "parquet-named-jsonl":
        path = _parquet(tmp_path / "rows.jsonl", ROWS)
        says = f"{path} is a Parquet file, not JSON Lines as its extension says"
    elif hostile == "gzip-named-csv":
        path = tmp_path / "rows.csv"
        path.write_bytes(gzip.compress(b"prompt,chosen,rejected\np,c,r\n"))
        says = f"{path} is a gzip file, not CSV as its extension says"
    else:
        path = tmp_path / "rows.json"
        body = json.dumps(ROWS[::2], indent=1, ensure_ascii=False).encode("latin-1")
        path.write_bytes(body)
        line = body[: body.index(b"\xe9")].count(b"\n") + 1
        col = body.index(b"\xe9") - body.rfind(b"\n", 0, body.index(b"\xe9"))
        says = f"{path}:{line}:{col}: not "
    got = _readers(tmp_path, path)
    assert got.pop("plan_count") is None
    for reader, result in got.items():
        assert isinstance(result, str) and says in result, (reader, result)
