"""The verdict reward of a judge trained by reinforcement (approach generative, method grpo).

Pure and standard-library only: `rmspec export --to verl` copies this file, as it is, into the
exported `compute_score` module, so verl's reward manager computes exactly the reward rmspec trains
with. Nothing here may import rmspec, torch or a third-party package.

A pair is judged in both orders: response A is the chosen one (the gold verdict is "A") and, in the
second row, the rejected one (gold "B"); so a judge that always writes "A" earns the `wrong` reward
half the time and position bias is trained away. An annotated tie's gold verdict is the rule's
`tie_verdict` (approach.ties: verdict); a tie never means "the first response wins".

Defaults after RM-R1: correct +1, wrong -1, unparsed -1. The output is read with `pattern` over the
whole completion (not its last characters); several matches that disagree count as unparsed, so
writing both verdicts earns nothing. Total: any completion gets a reward (a match whose verdict
group is unset states no verdict), never an exception that stops the trainer.
"""

# No `from __future__ import annotations`: verl loads the exported copy of this file without adding it
# to sys.modules, and dataclasses cannot resolve string annotations of such a module.
import re
from dataclasses import dataclass

FIRST, SWAPPED = "first", "swapped"  # the two orders of a pair: chosen as A, then chosen as B


@dataclass(frozen=True)
class RewardRule:
    """How one completion is rewarded; built from the spec's approach section (rule_from_spec)."""

    pattern: str  # verdict: one group, the verdict (A, B or tie_verdict); scores: two groups, A's and B's score
    output: str = "verdict"  # or "scores" (JudgeLRM: two scores whose order is the verdict)
    correct: float = 1.0
    wrong: float = -1.0
    unparsed: float = -1.0
    tie_verdict: str | None = None  # the verdict an annotated tie should get; None: ties were rejected
    format_pattern: str | None = None  # optional format term: a regex the completion should contain
    format_reward: float = 0.0  # added when format_pattern is found (subtracted when it is not: no)


def parse(text: str, rule: RewardRule) -> str | None:
    """The verdict a completion states ("A", "B", the tie verdict), or None when it states none or
    several that disagree. With output: scores, the verdict is the order of the two scores: A when
    A's score is higher, B when B's is, the tie verdict when they are equal (None without one)."""
    found = set()
    for match in re.finditer(rule.pattern, text):
        if rule.output == "scores":
            try:
                a, b = float(match.group(1)), float(match.group(2))
            except (TypeError, ValueError, IndexError):
                return None
            found.add("A" if a > b else "B" if b > a else rule.tie_verdict)
        else:  # the group that took part in the match (a pattern with alternatives leaves others unset)
            verdict = next((g for g in match.groups() if g is not None), None)
            if verdict is not None:
                found.add(verdict.strip())
    if len(found) != 1:
        return None
    verdict = found.pop()
    if verdict is None:  # equal scores with no tie verdict: not a verdict
        return None
    return verdict


def gold_verdict(order: str, tie: bool, rule: RewardRule) -> str:
    """The verdict a correct judge writes for a pair shown in `order` (first: chosen is A)."""
    if tie:
        if rule.tie_verdict is None:
            raise ValueError("a tie row reached the reward but ties are rejected (approach.ties: reject)")
        return rule.tie_verdict
    return "A" if order == FIRST else "B"


def verdict_reward(text: str, gold: str, rule: RewardRule) -> float:
    """The reward of one completion whose correct verdict is `gold`."""
    verdict = parse(text, rule)
    if verdict is None:
        reward = rule.unparsed
    elif verdict == gold:
        reward = rule.correct
    else:
        reward = rule.wrong
    if rule.format_pattern is not None and re.search(rule.format_pattern, text, flags=re.DOTALL):
        reward += rule.format_reward
    return reward


def rule_to_dict(rule: RewardRule) -> dict:
    """The rule as plain data (the exported compute_score file embeds it)."""
    return {k: getattr(rule, k) for k in RewardRule.__dataclass_fields__}
