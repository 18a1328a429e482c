"""A generative judge's figures: JudgeBench's two-game rule, for any pairwise benchmark.

Each pair is judged as (A, B) and as (B, A) (rmspec.inference.judge); the per-example rows carry
`label` ("A>B" / "B>A"), `verdict` and `verdict_swapped` (a letter, or None when unparsed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from rmspec.evaluate.figures import BenchmarkScore, check_lengths, mean


def flip_decision(decision: str | None) -> str | None:
    return {"A>B": "B>A", "B>A": "A>B"}.get(decision, decision) if decision is not None else None


def double_game_outcome(label: str, decision: str | None, decision_swapped: str | None) -> int:
    """JudgeBench's two-game rule for an order-dependent judge: +1 correct, -1 incorrect, 0 tie.

    decision_swapped is the verdict on (B, A); it is flipped back before counting.
    """
    counter = 0
    for d in (decision, flip_decision(decision_swapped)):
        if d == label:
            counter += 1
        elif d == flip_decision(label):
            counter -= 1
    return (counter > 0) - (counter < 0)


def verdict_decision(verdict: str | None) -> str | None:
    """A judge's letter on the order shown -> 'A>B' / 'B>A' (None stays None: unparsed)."""
    return {"A": "A>B", "B": "B>A"}.get(verdict) if verdict is not None else None


def score_two_games(
    kind: str,
    subsets: Sequence[str],
    labels: Sequence[str],
    verdicts: Sequence[str | None],
    verdicts_swapped: Sequence[str | None],
    section_of: Callable[[str], str] | None = None,
) -> BenchmarkScore:
    """A generative judge, JudgeBench's two games: each pair judged as (A, B) and as (B, A).

    A pair is correct when the two verdicts (the second flipped back) lean to the label
    (double_game_outcome > 0); inconsistent or unparsed verdicts count as not correct.
    Subsets: the example's subset/source; sections: section_of(subset), where the benchmark has
    sections (JudgeBench's categories).
    """
    check_lengths(subsets=subsets, labels=labels, verdicts=verdicts, verdicts_swapped=verdicts_swapped)
    correct = [
        double_game_outcome(label, verdict_decision(v), verdict_decision(s)) > 0
        for label, v, s in zip(labels, verdicts, verdicts_swapped)
    ]
    by_subset: dict[str, list[bool]] = defaultdict(list)
    by_section: dict[str, list[bool]] = defaultdict(list)
    for subset, ok in zip(subsets, correct):
        by_subset[subset].append(ok)
        if section_of is not None:
            by_section[section_of(subset)].append(ok)
    sections = {c: mean([float(v) for v in oks]) for c, oks in by_section.items()}
    subset_scores = {s: mean([float(v) for v in oks]) for s, oks in by_subset.items()}
    counts = {s: len(oks) for s, oks in by_subset.items()}
    return BenchmarkScore(
        kind,
        mean([float(v) for v in correct]),
        sections,
        subset_scores,
        counts,
        notes=["generative judge: two games per pair (responses swapped), JudgeBench's rule"],
    )
