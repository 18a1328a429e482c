"""Filters one by one on hand-made rows, and their order."""

from __future__ import annotations

from helpers.data import make_spec, read_jsonl, write_jsonl
from rmspec.data import load_canonical


def run(tmp_path, rows, filters, columns=None, approach=None):
    write_jsonl(tmp_path / "d.jsonl", rows)
    mapping = {"preset": "pairs", **({"columns": columns} if columns else {})}
    loaded = make_spec(
        tmp_path,
        {"source": {"kind": "files", "paths": ["d.jsonl"]}, "mapping": mapping, "filters": filters},
        approach=approach,
    )
    ds, report = load_canonical(loaded, rejects_path=tmp_path / "rejects.jsonl")
    return [r["id"] for r in ds], report, read_jsonl(tmp_path / "rejects.jsonl")


def rows(n=6):
    return [
        {
            "id": f"r{i}",
            "prompt": f"question {i}",
            "chosen": f"answer {i} with http://x.y" if i % 2 else f"answer {i}",
            "rejected": f"bad {i}",
            "score_chosen": float(i),
            "score_rejected": 1.0,
        }
        for i in range(n)
    ]


def test_regex_exclude_and_include(tmp_path):
    kept, report, rejects = run(tmp_path, rows(), [{"kind": "regex", "field": "chosen", "pattern": r"https?://"}])
    assert kept == ["r0", "r2", "r4"] and report.rejected == {"regex_match": 3}
    kept, report, _ = run(
        tmp_path, rows(), [{"kind": "regex", "field": "any", "pattern": r"question [0-2]\b", "action": "include"}]
    )
    assert kept == ["r0", "r1", "r2"] and report.rejected == {"regex_no_match": 3}


def test_min_score_gap_uses_scores(tmp_path):
    # gaps: score_chosen - 1 = -1, 0, 1, 2, 3, 4
    kept, report, rejects = run(tmp_path, rows(), [{"kind": "min_score_gap", "gap": 2}])
    assert kept == ["r3", "r4", "r5"] and report.rejected == {"score_gap_below_min": 3}
    assert {r["id"] for r in rejects} == {"r0", "r1", "r2"}


def test_min_score_gap_uses_a_mapped_margin_or_rejects_rows_without(tmp_path):
    data = [
        {"prompt": "a", "chosen": "x", "rejected": "y", "m": 0.5},
        {"prompt": "b", "chosen": "x", "rejected": "y", "m": 3.0},
    ]
    kept, report, _ = run(
        tmp_path,
        data,
        [{"kind": "min_score_gap", "gap": 1}],
        columns={"margin": "m"},
        approach={"kind": "bradley_terry", "use_margin": True},
    )
    assert kept == ["row-1"] and report.rejected == {"score_gap_below_min": 1}
    kept, report, _ = run(
        tmp_path, [{"prompt": "a", "chosen": "x", "rejected": "y"}], [{"kind": "min_score_gap", "gap": 1}]
    )
    assert kept == [] and report.rejected == {"missing_score": 1}


def test_sample_is_seeded_and_counted(tmp_path):
    kept, report, rejects = run(tmp_path, rows(10), [{"kind": "sample", "n": 4, "seed": 3}])
    again, _, _ = run(tmp_path, rows(10), [{"kind": "sample", "n": 4, "seed": 3}])
    assert len(kept) == 4 and kept == again and report.rejected == {"sampled_out": 6}
    other, _, _ = run(tmp_path, rows(10), [{"kind": "sample", "fraction": 0.5, "seed": 4}])
    assert len(other) == 5


def test_dedup_on_prompt_keeps_the_first(tmp_path):
    data = [
        {"id": "a", "prompt": "same", "chosen": "1", "rejected": "2"},
        {"id": "b", "prompt": "same", "chosen": "3", "rejected": "4"},
        {"id": "c", "prompt": "other", "chosen": "1", "rejected": "2"},
    ]
    kept, report, rejects = run(tmp_path, data, [{"kind": "dedup", "on": "prompt"}])
    assert kept == ["a", "c"] and rejects[0]["id"] == "b" and "id a" in rejects[0]["detail"]
    kept, _, _ = run(tmp_path, data, [{"kind": "dedup", "on": "row"}])
    assert kept == ["a", "b", "c"]


def test_filters_apply_in_the_order_written(tmp_path):
    data = [
        {"id": "e", "prompt": "q", "chosen": "", "rejected": "x"},
        {"id": "e2", "prompt": "q", "chosen": "", "rejected": "x"},
    ]
    _, first_empty, _ = run(tmp_path, data, [{"kind": "drop_empty"}, {"kind": "dedup"}])
    _, first_dedup, _ = run(tmp_path, data, [{"kind": "dedup"}, {"kind": "drop_empty"}])
    assert first_empty.rejected == {"empty": 2}
    assert first_dedup.rejected == {"duplicate": 1, "empty": 1}


def test_report_counts_ties_and_duplicates(tmp_path):
    data = [
        {"prompt": "a", "chosen": "x", "rejected": "y", "score_chosen": 3.0, "score_rejected": 3.0},
        {"prompt": "b", "chosen": "x", "rejected": "y", "score_chosen": 5.0, "score_rejected": 1.0},
        {"prompt": "b", "chosen": "x", "rejected": "y", "score_chosen": 5.0, "score_rejected": 1.0},
        {"prompt": "c", "chosen": "x", "rejected": "y", "score_chosen": None, "score_rejected": None},
    ]
    _, report, _ = run(tmp_path, data, [])
    assert report.ties == 1
    assert report.duplicate_rate == 0.25  # one row of four repeats an earlier one exactly
