"""ProcessBench's official scoring on hand-made cases, the local-file loader, and the tuned threshold.

The expected figures are worked out by hand below each case (acc_error over rows with an error,
acc_correct over rows without, F1 their harmonic mean, the headline the mean F1 over splits).
"""

from __future__ import annotations

import json
import math

import pytest

from rmspec.evaluate.kinds.processbench import (
    first_error_confusion,
    load_processbench,
    step_score_split,
    tune_threshold,
)
from rmspec.evaluate.scoring_rules import first_error, processbench_split, score_processbench, score_rows


def test_first_error_is_strict_at_the_threshold():
    assert first_error([0.9, 0.5, 0.1], 0.5) == 2  # 0.5 is not < 0.5: a tie counts as correct
    assert first_error([0.9, 0.49999, 0.1], 0.5) == 1
    assert first_error([0.9, 0.8], 0.5) == -1
    assert first_error([], 0.5) == -1


def test_one_split_by_hand():
    labels = [-1, -1, -1, 2, 0, 1]
    preds = [-1, 1, -1, 2, 1, 1]
    # correct rows: 2 of 3 right; erroneous rows: index 2 ok, 0 vs 1 wrong, 1 ok -> 2 of 3
    out = processbench_split(labels, preds)
    assert out["acc_correct"] == pytest.approx(2 / 3) and out["acc_error"] == pytest.approx(2 / 3)
    assert out["f1"] == pytest.approx(2 / 3)
    assert (out["num_error"], out["num_correct"]) == (3, 3)


def test_mean_f1_over_splits_and_all_correct_split():
    splits = ["gsm8k"] * 4 + ["math"] * 4 + ["omnimath"] * 2
    labels = [-1, -1, 0, 1, -1, 3, 3, 3, -1, -1]
    preds = [-1, 0, 0, 1, -1, 3, -1, 2, -1, 2]
    score = score_processbench(splits, labels, preds, threshold=0.5)
    # gsm8k: acc_error 2/2 = 1, acc_correct 1/2 -> F1 = 2*1*0.5/1.5 = 2/3
    # math: acc_error 1/3, acc_correct 1/1 -> F1 = 2*(1/3)/(4/3) = 0.5
    # omnimath: no erroneous rows -> no F1, left out of the mean
    assert score.subsets == pytest.approx({"gsm8k": 2 / 3, "math": 0.5})
    assert score.overall == pytest.approx((2 / 3 + 0.5) / 2)
    assert score.details["splits"]["omnimath"]["acc_error"] is None
    assert score.details["splits"]["omnimath"]["acc_correct"] == pytest.approx(0.5)
    assert any("omnimath" in n for n in score.notes)
    assert list(score.details["splits"]) == ["gsm8k", "math", "omnimath"]  # the official order
    assert score.counts == {"gsm8k": 4, "math": 4, "omnimath": 2}


def test_always_correct_baseline_scores_zero():
    labels = [-1, 2, 0, -1]
    base = score_processbench(["s"] * 4, labels, [-1] * 4)
    assert base.details["splits"]["s"]["acc_correct"] == 1.0 and base.details["splits"]["s"]["acc_error"] == 0.0
    assert base.overall == 0.0  # the official code divides 0 by 0 only when both are 0; here F1 = 0
    both_zero = processbench_split([-1, 1], [0, -1])
    assert both_zero["f1"] == 0.0


def test_no_split_with_both_kinds_gives_nan():
    score = score_processbench(["a", "a"], [-1, -1], [-1, -1])
    assert math.isnan(score.overall)


def test_score_rows_recomputes_from_per_example_rows():
    rows = [
        {"id": "gsm8k-0", "subset": "gsm8k", "label": -1, "prediction": -1, "step_scores": [0.9], "threshold": 0.5},
        {"id": "gsm8k-1", "subset": "gsm8k", "label": 1, "prediction": 1, "step_scores": [0.9, 0.2], "threshold": 0.5},
    ]
    score = score_rows("processbench", rows)
    assert score.overall == 1.0 and score.details["threshold"] == 0.5


def test_local_file_split_from_column_or_id_prefix(tmp_path):
    rows = [
        {"id": "gsm8k-0", "problem": "p", "steps": ["a", "b"], "label": -1},
        {"id": "math-12", "problem": "p", "steps": ["a"], "label": 0},
        {"id": "x", "split": "olympiadbench", "problem": "p", "steps": ["a"], "label": 0},
        {"id": "bad-1", "problem": "p", "steps": ["a"], "label": 5},
    ]
    path = tmp_path / "pb.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = load_processbench(str(path))
    assert [(e.id, e.subset, e.responses, e.meta["label"]) for e in data.examples] == [
        ("gsm8k-0", "gsm8k", ["a", "b"], -1),
        ("math-12", "math", ["a"], 0),
        ("x", "olympiadbench", ["a"], 0),
    ]
    assert data.notes and "1 row(s)" in data.notes[0]
    only_math = load_processbench(str(path), split="math")
    assert [e.id for e in only_math.examples] == ["math-12"]


def test_missing_columns_and_offline_hub_are_clear_errors(tmp_path, monkeypatch):
    from rmspec.errors import DataError

    path = tmp_path / "pb.jsonl"
    path.write_text(json.dumps({"id": "a-1", "question": "p", "steps": ["a"]}) + "\n")
    with pytest.raises(DataError, match="lacks column"):
        load_processbench(str(path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="cannot load Qwen/ProcessBench") as err:
        load_processbench(None, split="gsm8k")
    assert "local JSONL" in err.value.hint


def test_tuned_threshold_maximises_f1_and_prefers_near_half():
    rows = [
        {"subset": "s", "label": -1, "step_scores": [0.7, 0.65]},
        {"subset": "s", "label": 1, "step_scores": [0.7, 0.6]},
        {"subset": "s", "label": 0, "step_scores": [0.55]},
    ]
    # t in (0.6, 0.65]: row 0 -> -1 ok, row 1 -> 1 ok, row 2 -> 0 ok: F1 = 1; 0.65 is the grid point there
    t, f1 = tune_threshold(rows)
    assert t == 0.65 and f1 == 1.0
    # at 0.5 nothing is flagged: acc_error 0 -> F1 0
    assert score_processbench(["s"] * 3, [-1, 1, 0], [first_error(r["step_scores"], 0.5) for r in rows]).overall == 0.0


def test_confusion_table_and_step_split():
    rows = [
        {"label": -1, "prediction": -1, "step_scores": [0.9, 0.8]},
        {"label": 1, "prediction": 0, "step_scores": [0.4, 0.3, 0.9]},
        {"label": 7, "prediction": -1, "step_scores": [0.9] * 8},
    ]
    conf = first_error_confusion(rows)
    table = dict(zip(conf["labels"], conf["matrix"]))
    idx = {name: i for i, name in enumerate(conf["labels"])}
    assert table["none"][idx["none"]] == 1 and table["1"][idx["0"]] == 1 and table["5+"][idx["none"]] == 1
    good, bad = step_score_split(rows)
    # row 0: both correct; row 1: step 0 correct, step 1 wrong, step 2 unknown; row 2: 7 correct, step 7 wrong
    assert good == [0.9, 0.8, 0.4] + [0.9] * 7 and bad == [0.3, 0.9]
