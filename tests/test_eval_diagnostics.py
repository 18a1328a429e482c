"""Diagnostics on hand-made scores, checked against independent arithmetic (and scipy where it has the metric)."""

from __future__ import annotations

import json
import math

import pytest

from helpers.ci import need
from rmspec.evaluate import diagnostics as dg


def sig(x):
    return 1 / (1 + math.exp(-x))


def test_calibration_table_and_ece_by_hand():
    margins = [2.0, -2.0, 0.0, 0.1]
    result = dg.calibration(margins, bins=10)
    c2, c01 = sig(2.0), sig(0.1)
    # Bin [0.5, 0.55): the tie (conf 0.5, wrong) and margin 0.1 (conf 0.525, right).
    low = result["bins"][0]
    assert low["count"] == 2
    assert low["confidence"] == pytest.approx((0.5 + c01) / 2)
    assert low["accuracy"] == 0.5
    # Bin [0.85, 0.9): margins +-2, one right one wrong.
    high = result["bins"][7]
    assert high["count"] == 2 and high["accuracy"] == 0.5 and high["confidence"] == pytest.approx(c2)
    ece = 0.5 * abs(0.5 - (0.5 + c01) / 2) + 0.5 * abs(0.5 - c2)
    assert result["ece"] == pytest.approx(ece)
    assert sum(b["count"] for b in result["bins"]) == 4


def test_calibration_perfect_when_confidence_matches():
    # Margin log(3): P = 0.75 in a bin whose pairs are right 3 times in 4.
    m = math.log(3)
    result = dg.calibration([m, m, m, -m], bins=5)
    assert result["ece"] == pytest.approx(0.0, abs=1e-12)


def _pairs(chosen_len, rejected_len, chosen, rejected, subset="s"):
    return [dg.Pair(subset, c, r, lc, lr) for lc, lr, c, r in zip(chosen_len, rejected_len, chosen, rejected)]


def test_length_bias_reward_equals_length():
    pairs = _pairs([10, 3, 8, 5], [4, 9, 8, 1], [10, 3, 8, 5], [4, 9, 8, 1])
    bias = dg.length_bias(pairs)
    assert bias["pearson"] == pytest.approx(1.0)
    assert bias["spearman"] == pytest.approx(1.0)
    assert bias["accuracy_chosen_longer"] == 1.0 and bias["n_chosen_longer"] == 2
    assert bias["accuracy_chosen_shorter"] == 0.0 and bias["n_chosen_shorter"] == 1
    assert bias["n_same_length"] == 1
    assert bias["length_heuristic_accuracy"] == 0.5


def test_spearman_matches_scipy_with_ties():
    stats = need("scipy.stats")
    chosen_len, rejected_len = [5, 7, 7, 2, 9], [3, 3, 8, 1, 4]
    chosen, rejected = [0.3, 1.2, 1.2, -0.5, 2.0], [0.1, 0.0, 0.9, -0.7, 0.4]
    bias = dg.length_bias(_pairs(chosen_len, rejected_len, chosen, rejected))
    lengths = [v for pair in zip(chosen_len, rejected_len) for v in pair]
    rewards = [v for pair in zip(chosen, rejected) for v in pair]
    assert bias["spearman"] == pytest.approx(stats.spearmanr(lengths, rewards).statistic)
    assert bias["pearson"] == pytest.approx(stats.pearsonr(lengths, rewards).statistic)


def test_accuracy_by_length_buckets_and_subset():
    # Mean lengths 1..8; the four quartile buckets hold two pairs each.
    pairs = [dg.Pair("a" if i < 4 else "b", 1.0 if i % 2 else 0.0, 0.5, i + 1, i + 1) for i in range(8)]
    buckets = dg.accuracy_by_length(pairs, buckets=4)
    assert [b["count"] for b in buckets] == [2, 2, 2, 2]
    assert all(b["accuracy"] == 0.5 for b in buckets)
    by_subset = dg.accuracy_by_subset(pairs)
    assert by_subset == {"a": {"accuracy": 0.5, "count": 4}, "b": {"accuracy": 0.5, "count": 4}}


def test_pairs_from_rows_layouts():
    bon = [{"subset": "Math", "scores": [3, 1, 4], "num_correct": 1, "lengths": [5, 6, 7]}]
    assert [(p.chosen, p.rejected, p.len_rejected) for p in dg.pairs_from_rows("rewardbench2", bon)] == [
        (3, 1, 6),
        (3, 4, 7),
    ]
    rm = [{"subset": "chat", "score_chosen": [1, 2, 3], "score_rejected": [0, 5, 1], "lengths": [1, 2, 3, 4, 5, 6]}]
    got = [(p.chosen, p.rejected, p.len_chosen, p.len_rejected) for p in dg.pairs_from_rows("rm_bench", rm)]
    assert got == [(1, 0, 1, 4), (2, 5, 2, 5), (3, 1, 3, 6)]


def test_reward_distribution_and_normalization():
    dist = dg.reward_distribution([1.0, 3.0], [0.0, 2.0])
    assert dist["chosen"]["mean"] == 2.0 and dist["rejected"]["mean"] == 1.0
    assert dist["margin"]["mean"] == 1.0 and dist["margin"]["std"] == 0.0
    norm = dg.reward_normalization([1.0, 3.0], [0.0, 2.0])
    assert norm["mean"] == 1.5
    assert norm["std"] == pytest.approx(math.sqrt(((1 - 1.5) ** 2 + (3 - 1.5) ** 2 + 1.5**2 + 0.5**2) / 4))


def test_save_reward_stats_round_trips_through_transformers(tmp_path):
    transformers = need("transformers")
    transformers.BertConfig(
        hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8
    ).save_pretrained(tmp_path)
    dg.save_reward_stats(tmp_path, {"mean": 0.25, "std": 2.0})
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    assert config.reward_mean == 0.25 and config.reward_std == 2.0
    assert json.loads((tmp_path / "config.json").read_text())["reward_stats_source"] == "validation"


def test_verdict_consistency_by_hand():
    verdicts = ["A", "A", "B", None]
    swapped = ["B", "A", "A", "A"]  # 1: consistent; 2: same letter twice (position bias); 3: consistent
    labels = ["A", "B", "B", "A"]
    out = dg.verdict_consistency(verdicts, swapped, labels)
    assert out["consistency"] == pytest.approx(2 / 3)
    assert out["n_unparsed"] == 1
    assert out["position_bias_A"] == pytest.approx(5 / 7)  # A, A, B | B, A, A, A
    assert out["accuracy_first_order"] == 0.5  # rows 1 and 3
    assert out["accuracy_swapped_order"] == 0.75  # rows 1, 2 and 3 (flipped back)
    # Two-game outcomes: +1, 0 (one each way), +1, -1 (unparsed, then wrong)
    assert out["double_game"] == {"correct": 0.5, "incorrect": 0.25, "tie": 0.25}


def test_pair_diagnostics_on_rows():
    rows = [
        {"subset": "x", "score_chosen": 1.0, "score_rejected": 0.0, "len_chosen": 10, "len_rejected": 5},
        {"subset": "y", "score_chosen": 0.0, "score_rejected": 0.5, "len_chosen": 3, "len_rejected": 8},
    ]
    out = dg.pair_diagnostics("pairs", rows)
    assert out["num_pairs"] == 2 and out["pair_accuracy"] == 0.5
    assert out["length_bias"]["accuracy_chosen_longer"] == 1.0
    json.dumps(out)  # JSON-ready


def test_accuracy_by_source_for_judgebench_rows():
    rows = [
        {"subset": "knowledge", "source": "mmlu-pro-law", "score_chosen": 1.0, "score_rejected": 0.0},
        {"subset": "knowledge", "source": "mmlu-pro-biology", "score_chosen": 0.0, "score_rejected": 1.0},
    ]
    out = dg.pair_diagnostics("judgebench", rows)
    assert out["accuracy_by_subset"] == {"knowledge": {"accuracy": 0.5, "count": 2}}
    assert out["accuracy_by_source"]["mmlu-pro-law"]["accuracy"] == 1.0
    assert "accuracy_by_source" not in dg.pair_diagnostics(
        "pairs", [{"subset": "x", "score_chosen": 1.0, "score_rejected": 0.0}]
    )
