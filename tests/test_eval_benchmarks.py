"""Benchmark loaders on the small official-schema files in tests/fixtures/benchmarks.

A word-count scorer stands in for a model, so every expected figure is worked out by hand
from the fixture (see make_fixtures.py for the word counts).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.ci import missing
from rmspec.errors import DataError
from rmspec.evaluate.benchmarks import load_benchmark, per_example_rows
from rmspec.evaluate.scoring_rules import score_rows

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"


def word_scores(data):
    return [[float(len(r.split())) for r in ex.responses] for ex in data.examples]


def scored(kind, name, **kw):
    data = load_benchmark(kind, str(FIXTURES / name), **kw)
    rows = per_example_rows(data, word_scores(data))
    return data, rows, score_rows(kind, rows)


def test_rewardbench_file():
    data, rows, result = scored("rewardbench", "rewardbench.jsonl")
    assert len(data.examples) == 12 and data.examples[0].id == "1000"
    assert set(rows[0]) >= {"id", "subset", "score_chosen", "score_rejected"}
    assert result.subsets["mt-bench-easy"] == 0.0  # the tie
    assert result.subsets["math-prm"] == 0.5
    chat = 100 / (100 + 95 + 28)
    chat_hard = 37 / (37 + 100)
    safety = (100 + 136) / (100 + 154 + 136)
    reasoning = (0.5 * 984 + 164) / (984 + 164)
    assert result.sections == pytest.approx(
        {"Chat": chat, "Chat Hard": chat_hard, "Safety": safety, "Reasoning": reasoning}
    )
    assert result.overall == pytest.approx((chat + chat_hard + safety + reasoning) / 4)


def test_rewardbench_parquet_matches_jsonl():
    if not (FIXTURES / "rewardbench.parquet").exists():
        missing(
            "tests/fixtures/benchmarks/rewardbench.parquet is missing (python tests/fixtures/benchmarks/make_fixtures.py)"
        )
    a = scored("rewardbench", "rewardbench.jsonl")[2]
    b = scored("rewardbench", "rewardbench.parquet")[2]
    assert a.to_json() == b.to_json()


def test_rewardbench2_file():
    data, rows, result = scored("rewardbench2", "rewardbench2.jsonl")
    assert rows[0]["scores"] == [5.0, 1.0, 2.0, 3.0] and rows[0]["num_correct"] == 1
    ties = 0.3 + 0.3 + 0.2 + 0.2 + 0.01 * math.tanh(3)
    expected = {"Factuality": 0.75, "Precise IF": 0.0, "Math": 0.25, "Safety": 1.0, "Focus": 0.0, "Ties": ties}
    assert result.subsets == pytest.approx(expected)
    assert result.overall == pytest.approx(sum(expected.values()) / 6)


def test_rm_bench_file():
    data, rows, result = scored("rm_bench", "rm_bench.json")
    assert rows[0]["score_chosen"] == [3.0, 5.0, 7.0]
    assert result.subsets == pytest.approx({"chat": 2 / 3, "code": 0.0, "math": 2 / 3, "safety": 5 / 9})
    assert result.counts["safety"] == 2
    assert result.overall == pytest.approx((2 / 3 + 0 + 2 / 3 + 5 / 9) / 4)
    assert result.details["matrix"]["chat"] == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]


def test_judgebench_file():
    data, rows, result = scored("judgebench", "judgebench.jsonl")
    assert rows[1]["score_chosen"] == 2.0 and rows[1]["score_rejected"] == 5.0  # label B>A
    assert result.overall == pytest.approx(3 / 5)
    assert result.sections == pytest.approx({"knowledge": 0.5, "reasoning": 1.0, "math": 0.0, "coding": 1.0})


def test_pairs_file_and_limit():
    data, rows, result = scored("pairs", "pairs.jsonl")
    assert [r["subset"] for r in rows] == ["math", "math", "chat", "chat", "chat"]
    assert result.subsets == pytest.approx({"math": 0.5, "chat": 2 / 3})
    assert result.overall == pytest.approx(3 / 5)
    assert len(scored("pairs", "pairs.jsonl", limit=2)[0].examples) == 2


def test_conversational_pairs(tmp_path):
    row = {
        "chosen": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}],
        "rejected": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "go"}],
    }
    path = tmp_path / "conv.jsonl"
    path.write_text(json.dumps(row) + "\n")
    example = load_benchmark("pairs", str(path)).examples[0]
    assert example.prompt == [{"role": "user", "content": "hi"}]
    assert example.responses == ["hello there", "go"]


def test_missing_column_is_a_located_error(tmp_path):
    path = tmp_path / "rb.jsonl"
    path.write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n")
    with pytest.raises(DataError) as info:
        load_benchmark("rewardbench", str(path))
    assert "subset" in info.value.message and str(path) in info.value.message
    assert "prompt, chosen, rejected, subset" in info.value.hint


def test_missing_file_and_pairs_without_path(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_benchmark("pairs", str(tmp_path / "nope.jsonl"))
    with pytest.raises(DataError, match="needs a file"):
        load_benchmark("pairs")
    with pytest.raises(DataError, match="unknown benchmark"):
        load_benchmark("mmlu", "x.jsonl")


def test_relative_path_resolves_against_base_dir():
    data = load_benchmark("pairs", "pairs.jsonl", base_dir=FIXTURES)
    assert data.source == str((FIXTURES / "pairs.jsonl").resolve())


def test_hub_id_goes_through_datasets_and_fails_offline_with_a_hint(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    calls = []
    real = datasets.load_dataset

    def spy(path, *args, **kwargs):
        calls.append((path, kwargs.get("split")))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", spy)
    with pytest.raises(DataError) as info:
        load_benchmark("rewardbench")
    assert calls == [("allenai/reward-bench", "filtered")]
    assert "local" in info.value.hint


def test_pairs_with_a_preset_goes_through_the_data_pipeline(tmp_path):
    rows = [
        {
            "chosen": "\n\nHuman: Hi there\n\nAssistant: Hello! How can I help?",
            "rejected": "\n\nHuman: Hi there\n\nAssistant: Go away.",
        },
        {
            "chosen": "\n\nHuman: A\n\nAssistant: B",
            "rejected": "\n\nHuman: different\n\nAssistant: C",
        },  # prefixes differ
    ]
    path = tmp_path / "hh.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = load_benchmark("pairs", str(path), preset="hh-rlhf")
    assert len(data.examples) == 1
    example = data.examples[0]
    assert example.prompt == [{"role": "user", "content": "Hi there"}]
    assert example.responses == ["Hello! How can I help?", "Go away."]
    assert data.notes == ["1 row(s) skipped: malformed"]
    with pytest.raises(DataError, match="does not give preference pairs"):
        load_benchmark("pairs", str(path), preset="helpsteer2")


def test_pairs_missing_columns_named_by_the_preset(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "q", "good": "a", "bad": "b"}) + "\n")
    with pytest.raises(DataError) as info:
        load_benchmark("pairs", str(path))
    assert "chosen" in info.value.message and "question" in info.value.message
