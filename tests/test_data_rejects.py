"""Nothing leaves silently: broken rows land in the rejects file with the right reason, good rows
pass, and rows read = rows kept + rows rejected, per reason."""

from __future__ import annotations

from collections import Counter

import pytest

from helpers.data import bert_tokenizer, make_spec, read_jsonl, write_jsonl
from rmspec.data import prepare

LONG = " ".join(f"word{i % 50}" for i in range(400))

ROWS = [
    ({"prompt": "What is 2 + 2?", "chosen": "4", "rejected": "5"}, None),
    ({"prompt": "Name a colour.", "rejected": "blue"}, "missing_field"),
    ({"prompt": "Name a fruit.", "chosen": 7, "rejected": "apple"}, "wrong_type"),
    ({"prompt": "Name a tree.", "chosen": "oak", "rejected": {"text": "elm"}}, "wrong_type"),
    ({"prompt": "Say hi.", "chosen": "", "rejected": "hi"}, "empty"),
    ({"prompt": "Say bye.", "chosen": "bye", "rejected": "   "}, "empty"),
    ({"prompt": "Pick one.", "chosen": "same answer", "rejected": "same answer"}, "identical"),
    ({"prompt": "Write a lot.", "chosen": LONG, "rejected": "short"}, "too_long"),
    ({"prompt": None, "chosen": "a", "rejected": "b"}, "missing_field"),
    ({"prompt": "Capital of France?", "chosen": "Paris", "rejected": "Lyon"}, None),
    ({"prompt": "What is 2 + 2?", "chosen": "4", "rejected": "5"}, "duplicate"),
    ({"prompt": "Is it late?", "chosen": "Yes, it is late.", "rejected": "No."}, None),
]


@pytest.fixture
def spec_with_broken_rows(tmp_path):
    write_jsonl(tmp_path / "broken.jsonl", [r for r, _ in ROWS])
    return make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["broken.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [
                {"kind": "drop_empty"},
                {"kind": "drop_identical"},
                {"kind": "dedup"},
                {"kind": "max_length", "max_tokens": 64, "policy": "drop"},
            ],
        },
        max_length=64,
    )


def test_each_broken_row_is_rejected_with_its_reason(tmp_path, spec_with_broken_rows):
    # A line that is not JSON at all leaves as a reject too, instead of failing the whole file.
    with (tmp_path / "broken.jsonl").open("a") as fh:
        fh.write('{"prompt": "cut off", "chosen": \n')
    rows = [*ROWS, ({}, "invalid_json")]
    rejects = tmp_path / "out" / "rejects.jsonl"
    prepared = prepare(spec_with_broken_rows, bert_tokenizer(), rejects_path=rejects, cache_dir=tmp_path / "cache")
    lines = read_jsonl(rejects)
    got = {line["source_index"]: line["reason"] for line in lines}
    expected = {i: reason for i, (_, reason) in enumerate(rows) if reason}
    assert got == expected
    for line in lines:  # each line says where it left and carries the row
        assert set(line) == {"source", "source_index", "id", "stage", "reason", "detail", "row"}
        assert line["detail"]
        assert line["stage"] == (
            "map"
            if line["reason"] in ("missing_field", "wrong_type", "invalid_json")
            else f"filter:{_kind(line['reason'])}"
        )
    assert lines[0]["row"] == ROWS[lines[0]["source_index"]][0]  # a mapping reject keeps the source row as read
    kept = [r["chosen"] for r in prepared.train]
    assert kept == [r["chosen"] for r, reason in rows if reason is None]
    assert kept[0] == "4"  # text that looks like a number stays text
    report = prepared.report
    assert report.rows_read == len(rows)
    assert report.rows_read == report.rows_kept + sum(report.rejected.values())
    assert report.rejected == dict(Counter(reason for _, reason in rows if reason))
    assert report.reconciled and report.to_json()["reconciled"] is True


def _kind(reason: str) -> str:
    return {"empty": "drop_empty", "identical": "drop_identical", "duplicate": "dedup", "too_long": "max_length"}[
        reason
    ]


def test_rejects_survive_the_cache(tmp_path, spec_with_broken_rows):
    first = tmp_path / "r1.jsonl"
    second = tmp_path / "r2.jsonl"
    a = prepare(spec_with_broken_rows, bert_tokenizer(), rejects_path=first, cache_dir=tmp_path / "cache")
    b = prepare(spec_with_broken_rows, bert_tokenizer(), rejects_path=second, cache_dir=tmp_path / "cache")
    assert not a.report.cached and b.report.cached
    assert first.read_text() == second.read_text()
    assert b.report.to_json()["rejected"] == a.report.to_json()["rejected"]
    assert b.train.to_list() == a.train.to_list()


def test_truncation_that_makes_a_pair_identical_is_a_reject(tmp_path):
    rows = [
        {"prompt": "Tell me", "chosen": LONG + " yes", "rejected": LONG + " no"},
        {"prompt": "Tell me more", "chosen": "short yes", "rejected": "short no"},
    ]
    write_jsonl(tmp_path / "t.jsonl", rows)
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["t.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [{"kind": "max_length", "policy": "truncate_response"}],
        },
        max_length=48,
    )
    prepared = prepare(loaded, bert_tokenizer(), rejects_path=tmp_path / "rej.jsonl", cache_dir=tmp_path / "c")
    assert prepared.report.rejected == {"identical_after_truncation": 1}
    assert [r["source_index"] for r in read_jsonl(tmp_path / "rej.jsonl")] == [0]
    assert len(prepared.train) == 1


def test_nothing_left_is_an_error_that_names_the_reasons(tmp_path):
    from rmspec.errors import DataError

    write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "chosen": "same", "rejected": "same"}])
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [{"kind": "drop_identical"}],
        },
    )
    with pytest.raises(DataError, match="identical"):
        prepare(loaded, bert_tokenizer(), rejects_path=tmp_path / "r.jsonl", cache_dir=tmp_path / "c")
    assert read_jsonl(tmp_path / "r.jsonl")[0]["reason"] == "identical"


def test_nothing_left_shows_the_first_rows_detail_and_how_to_see_them_all(tmp_path):
    """Every row rejected: the error says why on one line (the first row's detail for each reason), not only a
    count. The reply here is a critic's turn, a role no chat template knows."""
    from rmspec.errors import DataError

    critic = [{"role": "critic", "content": "[Analysis]\n\n**Correctness (8/10)**: it misses the ending."}]
    write_jsonl(tmp_path / "d.jsonl", [{"q": "Summarise the chapter.", "good": "A summary.", "bad": critic}])
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"columns": {"prompt": "q", "chosen": "good", "rejected": "bad"}},
        },
    )
    with pytest.raises(DataError) as caught:
        prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")
    message = str(caught.value)
    assert "{'wrong_type': 1}" in message
    assert (
        "wrong_type: rejected[0] must be {role: system|user|assistant, content: text}, got {'role': 'critic'" in message
    )
    assert "\n" not in message.split("the first of each:")[1]  # the row's own newlines folded
    assert "rmspec data report SPEC --rejects FILE" in caught.value.hint
