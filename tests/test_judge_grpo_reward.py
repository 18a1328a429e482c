"""The verdict reward of a GRPO judge, case by case by hand: right, wrong, unparsed, both orders,
ties, the score variant (JudgeLRM) and the format term."""

from __future__ import annotations

import pytest

from rmspec.train.judge_reward import FIRST, SWAPPED, RewardRule, gold_verdict, parse, verdict_reward

VERDICT = RewardRule(pattern=r"\[\[(A|B)\]\]")
WITH_TIES = RewardRule(pattern=r"\[\[(A|B|C)\]\]", tie_verdict="C")
SCORES = RewardRule(pattern=r"\[\[\s*(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)\s*\]\]", output="scores", correct=2.0)


def test_right_wrong_unparsed_rm_r1_defaults():
    assert verdict_reward("I think [[A]]", "A", VERDICT) == 1.0
    assert verdict_reward("so [[B]]", "A", VERDICT) == -1.0
    assert verdict_reward("A is better", "A", VERDICT) == -1.0  # no verdict: unparsed
    custom = RewardRule(pattern=VERDICT.pattern, correct=1.0, wrong=0.0, unparsed=-0.5)
    assert [verdict_reward(t, "B", custom) for t in ("[[B]]", "[[A]]", "")] == [1.0, 0.0, -0.5]


def test_the_whole_completion_is_read_and_disagreeing_verdicts_are_unparsed():
    # RM-R1 reads the last 80 characters only; rmspec reads everything
    long = "[[A]]" + " reasoning" * 20
    assert verdict_reward(long, "A", VERDICT) == 1.0
    assert parse("[[A]] ... on reflection [[B]]", VERDICT) is None  # hedging earns nothing
    assert verdict_reward("[[A]] ... on reflection [[B]]", "A", VERDICT) == -1.0
    assert parse("[[B]] and again [[B]]", VERDICT) == "B"  # repeating one verdict is one verdict


def test_both_orders_of_a_pair():
    # the chosen response is A in the first order and B when swapped
    assert gold_verdict(FIRST, False, VERDICT) == "A"
    assert gold_verdict(SWAPPED, False, VERDICT) == "B"
    always_a = "[[A]]"  # position bias: right in one order, wrong in the other
    rewards = [verdict_reward(always_a, gold_verdict(o, False, VERDICT), VERDICT) for o in (FIRST, SWAPPED)]
    assert rewards == [1.0, -1.0]


def test_ties_get_the_tie_verdict_never_first_wins():
    gold = gold_verdict(FIRST, True, WITH_TIES)
    assert gold == "C" and gold_verdict(SWAPPED, True, WITH_TIES) == "C"
    assert verdict_reward("[[C]]", gold, WITH_TIES) == 1.0
    assert verdict_reward("[[A]]", gold, WITH_TIES) == -1.0  # the first response does not win a tie
    with pytest.raises(ValueError, match="ties are rejected"):
        gold_verdict(FIRST, True, VERDICT)


def test_score_variant_order_of_two_scores():
    assert parse("[[8, 3]]", SCORES) == "A"
    assert parse("[[2.5, 7]]", SCORES) == "B"
    assert verdict_reward("[[8, 3]]", "A", SCORES) == 2.0
    assert verdict_reward("[[8, 3]]", "B", SCORES) == -1.0
    # equal scores: JudgeLRM's >= makes this "A wins"; here it is no verdict without a tie verdict ...
    assert parse("[[5, 5]]", SCORES) is None
    assert verdict_reward("[[5, 5]]", "A", SCORES) == -1.0
    # ... and the tie verdict when ties are trained
    tie_scores = RewardRule(pattern=SCORES.pattern, output="scores", tie_verdict="C")
    assert verdict_reward("[[5, 5]]", "C", tie_scores) == 1.0
    assert verdict_reward("[[6, 5]]", "C", tie_scores) == -1.0
    assert parse("[[8, 3]] then [[1, 9]]", SCORES) is None  # disagreeing scores: unparsed


def test_format_term_is_added_when_found():
    rule = RewardRule(pattern=VERDICT.pattern, format_pattern=r"<think>.+</think>", format_reward=0.25)
    assert verdict_reward("<think>a\nb</think> [[A]]", "A", rule) == 1.25  # DOTALL: spans lines
    assert verdict_reward("[[A]]", "A", rule) == 1.0
    assert verdict_reward("<think>x</think>", "A", rule) == -0.75  # unparsed plus the format term
