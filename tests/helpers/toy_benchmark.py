"""A benchmark kind from outside rmspec, in one module: its catalogue entry and how it reads and scores.

Rows {question, good, bad, topic}; the figure is the share of rows whose good answer scores strictly
higher, per topic and overall. Registered by one line, `registry.register(INFO, KIND)`
(tests/test_toy_benchmark.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rmspec.evaluate.figures import BenchmarkScore, accuracy_by_subset
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import Example
from rmspec.spec.benchmarks import REWARD, BenchmarkInfo

INFO = BenchmarkInfo("toy_pairs", None, None, (REWARD,), __name__, "a toy pair benchmark: good vs bad answers")


class ToyPairs(BenchmarkKind):
    name = "toy_pairs"
    columns = ("question", "good", "bad")

    def examples(self, rows: list[dict[str, Any]], source: str) -> list[Example]:
        return [
            Example(str(i), str(r.get("topic") or "all"), r["question"], [r["good"], r["bad"]])
            for i, r in enumerate(rows)
        ]

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        subsets = [str(r.get("subset") or "all") for r in rows]
        chosen = [float(r["score_chosen"]) for r in rows]
        rejected = [float(r["score_rejected"]) for r in rows]
        accuracy, counts = accuracy_by_subset(subsets, chosen, rejected)
        overall = sum(c > r for c, r in zip(chosen, rejected)) / len(rows)
        return BenchmarkScore(self.name, overall, {}, accuracy, counts)


KIND = ToyPairs()
