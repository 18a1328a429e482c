"""Signed weights under `on_failure: skip` (issue 41 #2): the remaining weights are renormalised by
absolute weight, so a penalty stays a penalty and weights of opposite signs never cancel into a
zero denominator. Every expected reward is computed here by hand from the components' values."""

from __future__ import annotations

import asyncio

import pytest

from rmspec.composite.combine import combine_row
from rmspec.composite.components.context import Context
from rmspec.composite.outcome import failed, ok
from rmspec.composite.scorer import CompositeScorer
from rmspec.spec.composite import Composite

SKIPPED = failed("no_reference", "no label")


def _composite(combine: str, weights: dict[str, float]) -> Composite:
    return Composite.model_validate(
        {
            "kind": "composite",
            "combine": combine,
            "on_failure": "skip",
            "components": [{"name": n, "kind": "repetition", "weight": w} for n, w in weights.items()],
        }
    )


def test_a_skipped_component_leaves_a_penalty_a_penalty():
    composite = _composite("weighted_sum", {"correct": 2, "rep": -1})
    v = 0.4  # the repetition component's value: weight -1 makes it a penalty of 0.4
    row = combine_row(composite, {"correct": SKIPPED, "rep": ok(v)})
    # by hand: sum(w v) over kept = -1 * 0.4, scaled by (|2| + |-1|) / |-1| = 3
    assert row.reward == pytest.approx(-1 * v * 3 / 1)
    assert row.reward < 0
    # nothing skipped: the plain weighted sum, whatever the signs
    assert combine_row(composite, {"correct": ok(1.0), "rep": ok(v)}).reward == pytest.approx(2 * 1.0 - 1 * v)
    # the penalty component skipped: the other is scaled by 3 / 2
    assert combine_row(composite, {"correct": ok(1.0), "rep": SKIPPED}).reward == pytest.approx(2 * 1.0 * 3 / 2)


def test_weighted_mean_with_opposite_weights_and_a_skip():
    composite = _composite("weighted_mean", {"a": 1, "b": -1, "c": 1})
    a, b, c = 0.5, 0.2, 0.9
    row = combine_row(composite, {"a": ok(a), "b": ok(b), "c": SKIPPED})
    assert row.error is None, row.error
    assert row.reward == pytest.approx((1 * a - 1 * b) / (1 + 1))
    full = combine_row(composite, {"a": ok(a), "b": ok(b), "c": ok(c)})
    assert full.reward == pytest.approx((a - b + c) / 3)
    # every weighted component skipped: the row has no value, and says so
    none = combine_row(composite, {"a": SKIPPED, "b": SKIPPED, "c": SKIPPED})
    assert none.reward is None and "no weighted component" in (none.error or "")


def test_serve_answers_the_batch_instead_of_422():
    """The same composite under serve: a row with a skipped component gets its reward, not a 422 for
    the whole batch (a math_answer with no label is skipped before any math-verify pool starts)."""
    composite = Composite.model_validate(
        {
            "kind": "composite",
            "combine": "weighted_mean",
            "on_failure": "skip",
            "components": [
                {"name": "think", "kind": "regex", "pattern": "<think>", "match": "search", "weight": 1},
                {"name": "answer", "kind": "regex", "pattern": "ANSWER", "match": "search", "weight": -1},
                {"name": "math", "kind": "math_answer", "weight": 1},
            ],
        }
    )
    from rmspec.serve.composite import composite_rewards

    scorer = CompositeScorer(composite, Context())
    try:
        queries = ["Q: <think> ANSWER", "Q: <think> no"]
        answer = asyncio.run(composite_rewards(scorer, None, queries, ["Q:"] * 2, [None, None]))
    finally:
        scorer.close()
    # by hand: think 1, answer 1 -> (1 - 1) / 2; think 1, answer 0 -> (1 - 0) / 2
    assert answer["rewards"] == pytest.approx([0.0, 0.5])
