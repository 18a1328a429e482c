"""Ties (issues 19 and 21): a row with `tie: true` never trains as "first response wins".

With `approach.ties: reject` (the default) such rows are rejects with reason `tie`, counted in the
data report; with `ties: davidson` they are kept and carry `tie = True` for the Davidson loss."""

from __future__ import annotations

from helpers.data import bert_tokenizer, make_spec, read_jsonl, write_jsonl
from rmspec.data import prepare

ROWS = [
    {"prompt": "What is 2 + 2?", "chosen": "4", "rejected": "5"},
    {"prompt": "Which is nicer?", "chosen": "red", "rejected": "blue", "tie": True},
    {"prompt": "Capital of France?", "chosen": "Paris", "rejected": "Lyon", "tie": False},
    {"prompt": "Pick a day.", "chosen": "Monday", "rejected": "Tuesday", "tie": True},
]


def _prepare(tmp_path, approach):
    write_jsonl(tmp_path / "ties.jsonl", ROWS)
    spec = make_spec(
        tmp_path,
        {"source": {"kind": "files", "paths": ["ties.jsonl"]}, "mapping": {"preset": "pairs"}},
        approach=approach,
    )
    rejects = tmp_path / "rejects.jsonl"
    return prepare(spec, bert_tokenizer(), rejects_path=rejects, cache_dir=tmp_path / "cache"), rejects


def test_tie_rows_are_rejected_with_reason_tie_by_default(tmp_path):
    prepared, rejects = _prepare(tmp_path, {"kind": "bradley_terry"})
    assert [r["chosen"] for r in prepared.train] == ["4", "Paris"]
    lines = read_jsonl(rejects)
    assert sorted(line["source_index"] for line in lines) == [1, 3]
    assert {line["reason"] for line in lines} == {"tie"}
    assert prepared.report.rejected.get("tie") == 2


def test_davidson_keeps_tie_rows_and_marks_them(tmp_path):
    prepared, _ = _prepare(tmp_path, {"kind": "bradley_terry", "ties": "davidson"})
    assert [(r["chosen"], r["tie"]) for r in prepared.train] == [
        ("4", False),
        ("red", True),
        ("Paris", False),
        ("Monday", True),
    ]
    assert prepared.report.rejected.get("tie") is None


def test_a_tie_value_that_is_not_a_boolean_is_a_reject(tmp_path):
    write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"prompt": "a", "chosen": "b", "rejected": "c", "tie": "maybe"},
            {"prompt": "d", "chosen": "e", "rejected": "f"},
        ],
    )
    spec = make_spec(tmp_path, {"source": {"kind": "files", "paths": ["bad.jsonl"]}, "mapping": {"preset": "pairs"}})
    rejects = tmp_path / "rejects.jsonl"
    prepared = prepare(spec, bert_tokenizer(), rejects_path=rejects, cache_dir=tmp_path / "cache")
    assert [r["chosen"] for r in prepared.train] == ["e"]
    assert read_jsonl(rejects)[0]["reason"] == "wrong_type"
