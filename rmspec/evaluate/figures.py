"""What every benchmark's scoring shares: the figures it reports and the plain counting under them.

Light (standard library only): the report and `rmspec report` read these without torch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BenchmarkScore:
    """One benchmark's figures, all fractions in 0..1."""

    kind: str
    overall: float
    sections: dict[str, float] = field(default_factory=dict)
    subsets: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # examples per subset
    details: dict[str, Any] = field(default_factory=dict)  # benchmark-specific (RM-Bench matrix, ...)
    notes: list[str] = field(default_factory=list)  # departures a reader must know about

    @property
    def num_examples(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "overall": self.overall,
            "sections": dict(self.sections),
            "subsets": dict(self.subsets),
            "counts": dict(self.counts),
            "num_examples": self.num_examples,
            "details": self.details,
            "notes": list(self.notes),
        }


@dataclass
class Pair:
    """One chosen-vs-rejected comparison, what the diagnostics and the report's plots read."""

    subset: str
    chosen: float
    rejected: float
    len_chosen: int | None = None
    len_rejected: int | None = None

    @property
    def margin(self) -> float:
        return self.chosen - self.rejected

    @property
    def correct(self) -> bool:
        return self.chosen > self.rejected  # strict, as the benchmarks count


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def pair_correct(score_chosen: float, score_rejected: float) -> bool:
    """A pair counts only if the chosen response scores strictly higher: a tie is wrong."""
    return score_chosen > score_rejected


def check_lengths(**columns: Sequence[Any]) -> None:
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"columns differ in length: {lengths}")


def accuracy_by_subset(
    subsets: Sequence[str], chosen: Sequence[float], rejected: Sequence[float]
) -> tuple[dict[str, float], dict[str, int]]:
    check_lengths(subsets=subsets, chosen=chosen, rejected=rejected)
    hits: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for subset, c, r in zip(subsets, chosen, rejected):
        counts[subset] += 1
        hits[subset] += pair_correct(c, r)
    return {s: hits[s] / counts[s] for s in counts}, dict(counts)
