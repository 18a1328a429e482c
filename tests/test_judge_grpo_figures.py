"""The GRPO judge's batch figures and the totality of its reward (issue 41 #6, #7), by hand.

Position agreement: of the pairs judged in both orders, the share whose majority picks the same
response in both; a split vote (4 for each response) has no majority and counts as disagreement
(a coin-flip judge must not log 1.0). The reward gives a value for every completion, whatever the
pattern leaves unset; a pattern whose groups the reward cannot read is refused at validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.ci import need
from rmspec.train.judge_grpo import batch_figures
from rmspec.train.judge_reward import FIRST, SWAPPED, RewardRule, parse, verdict_reward

SPEC = Path(__file__).resolve().parents[1] / "specs" / "judge_grpo.yaml"


def _batch(groups: dict[tuple[str, str], list[str | None]]):
    """(pair, order) -> the verdicts of its completions, as the trainer's columns."""
    verdicts, gold, order, pair = [], [], [], []
    for (p, o), vs in groups.items():
        for v in vs:
            verdicts.append(v)
            gold.append("A" if o == FIRST else "B")
            order.append(o)
            pair.append(p)
    return verdicts, gold, order, pair


def test_a_split_vote_is_disagreement():
    coin = _batch({("p", FIRST): ["A"] * 4 + ["B"] * 4, ("p", SWAPPED): ["A"] * 4 + ["B"] * 4})
    assert batch_figures(*coin)["judge/position_agreement"] == 0.0
    # split in one order only: still no agreement
    half = _batch({("p", FIRST): ["A"] * 6 + ["B"] * 2, ("p", SWAPPED): ["A", "B"]})
    assert batch_figures(*half)["judge/position_agreement"] == 0.0


def test_agreement_by_hand_over_several_pairs():
    groups = {
        # p1: chosen in both orders (A first, B swapped): agrees
        ("p1", FIRST): ["A", "A", "A", "B"],
        ("p1", SWAPPED): ["B", "B", "A", "B"],
        # p2: position bias, always A: picks chosen then rejected: disagrees
        ("p2", FIRST): ["A"] * 4,
        ("p2", SWAPPED): ["A"] * 4,
        # p3: rejected in both orders: agrees (consistent, if wrong)
        ("p3", FIRST): ["B", "B", None, None],
        ("p3", SWAPPED): ["A", "A", "A", None],
        # p4: split in the swapped order: disagrees
        ("p4", FIRST): ["A", "A"],
        ("p4", SWAPPED): ["A", "B"],
        # p5: seen in one order only: not counted
        ("p5", FIRST): ["A"],
    }
    figures = batch_figures(*_batch(groups))
    assert figures["judge/position_agreement"] == pytest.approx(2 / 4)
    verdicts, gold, _, _ = _batch(groups)
    assert figures["judge/verdict_accuracy"] == pytest.approx(sum(v == g for v, g in zip(verdicts, gold)) / len(gold))
    assert figures["judge/unparsed_rate"] == pytest.approx(3 / len(verdicts))


ALTERNATION = RewardRule(pattern=r"\[\[(A|B)\]\]|Verdict: (A|B)")
ONE_GROUP_ALTERNATIVES = RewardRule(pattern=r"\[\[(A|B)\]\]|Verdict: [AB]")


def test_the_reward_is_total():
    # group 1 unset by the second alternative: the group that matched is read (it raised AttributeError)
    assert parse("Verdict: B", ALTERNATION) == "B"
    assert verdict_reward("Verdict: B", "B", ALTERNATION) == 1.0
    assert verdict_reward("[[A]] then Verdict: B", "A", ALTERNATION) == -1.0  # disagreeing: unparsed
    # a match whose only group is unset states no verdict
    assert parse("Verdict: B", ONE_GROUP_ALTERNATIVES) is None
    assert verdict_reward("Verdict: B", "B", ONE_GROUP_ALTERNATIVES) == -1.0
    assert verdict_reward("[[A]]", "A", RewardRule(pattern=r"\[\[(A|B)?\]\]")) == 1.0
    assert verdict_reward("[[]]", "A", RewardRule(pattern=r"\[\[(A|B)?\]\]")) == -1.0
    scores = RewardRule(pattern=r"\[\[(\d+), (\d+)\]\]|\[\[(\d+)\]\]", output="scores", tie_verdict="C")
    assert verdict_reward("[[7]]", "A", scores) == -1.0  # groups unset: unparsed, no exception


def test_a_pattern_whose_groups_the_reward_cannot_read_is_refused_at_validate(cli):
    result = cli("validate", str(SPEC), "--set", r"approach.verdict_pattern='\[\[(A|B)\]\]|Verdict: (A|B)'")
    assert result.code == 2 and "Traceback" not in result.err
    assert "approach.verdict_pattern" in result.err and "1 group(s), but verdict_pattern has 2" in result.err
    assert "(?:" in result.err  # the hint says how to write the other parentheses
    ok = cli("validate", str(SPEC), "--set", r"approach.verdict_pattern='(?:\[\[|Verdict: )(A|B)\]?\]?'")
    assert ok.code == 0, ok.err


def test_the_other_verdict_readers_read_the_group_that_matched():
    """The same pattern read by the sft judge's metrics and by judge inference (evaluation, serve)."""
    need("torch")
    from rmspec.inference.judge import parse_verdict as inference_verdict
    from rmspec.train.generative import parse_verdict as sft_verdict

    pattern = ALTERNATION.pattern
    assert sft_verdict("Verdict: B", pattern) == "B"  # it raised AttributeError
    assert inference_verdict("Verdict: B", pattern) == "B"  # it read no verdict
    assert inference_verdict("[[A]] and Verdict: B", pattern) is None  # both named: none
    assert sft_verdict("no verdict", pattern) is None
    # two different verdicts: none for the sft judge's metrics too, as evaluation reads them (it took the first)
    assert sft_verdict("[[A]] ... on reflection [[B]]", r"\[\[(A|B)\]\]") is None
    assert sft_verdict("[[B]] and again [[B]]", r"\[\[(A|B)\]\]") == "B"
