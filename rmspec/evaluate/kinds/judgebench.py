"""JudgeBench (ScalerLab/JudgeBench): pairs with a label A>B / B>A, grouped by source and category.

Official rule for a reward model, checked against ScalerLab/JudgeBench `utils/judges.py`
(reward-model judges) and `utils/metrics.py`: the decision is A>B when score_A > score_B, else
B>A (a tie reads B>A); accuracy per category (Knowledge, Reasoning, Math, Coding), per source
and overall. A generative judge plays JudgeBench's two games (rmspec.evaluate.verdicts).
Per-example rows: id, subset (the category), source, label, score_A, score_B, and
score_chosen/score_rejected and len_chosen/len_rejected by the label.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore, check_lengths, mean
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import Example

# Source prefix -> category, as in the paper's table (Knowledge, Reasoning, Math, Coding).
JUDGEBENCH_CATEGORIES = (
    ("mmlu-pro", "knowledge"),
    ("livebench-reasoning", "reasoning"),
    ("livebench-math", "math"),
    ("livecodebench", "coding"),
)


def judgebench_category(source: str) -> str:
    for prefix, category in JUDGEBENCH_CATEGORIES:
        if source.startswith(prefix):
            return category
    return source.split("-")[0] or source


def reward_model_decision(score_a: float, score_b: float) -> str:
    """The official reward-model judge: 'A>B' if score_A > score_B, else 'B>A' (a tie reads B>A)."""
    return "A>B" if score_a > score_b else "B>A"


def score_judgebench(
    sources: Sequence[str], labels: Sequence[str], score_a: Sequence[float], score_b: Sequence[float]
) -> BenchmarkScore:
    """Accuracy of the reward model's decision against the label, per category, per source and overall."""
    check_lengths(sources=sources, labels=labels, score_a=score_a, score_b=score_b)
    correct = [reward_model_decision(a, b) == label for a, b, label in zip(score_a, score_b, labels)]
    by_source: dict[str, list[bool]] = defaultdict(list)
    by_category: dict[str, list[bool]] = defaultdict(list)
    for source, ok in zip(sources, correct):
        by_source[source].append(ok)
        by_category[judgebench_category(source)].append(ok)
    sections = {c: mean([float(v) for v in oks]) for c, oks in by_category.items()}
    subsets = {s: mean([float(v) for v in oks]) for s, oks in by_source.items()}
    counts = {s: len(oks) for s, oks in by_source.items()}
    return BenchmarkScore("judgebench", mean([float(v) for v in correct]), sections, subsets, counts)


class JudgeBench(BenchmarkKind):
    name = "judgebench"
    columns = ("question", "response_A", "response_B", "label", "source")
    judge_section = staticmethod(judgebench_category)
    source_column = "source"

    def examples(self, rows: list[dict[str, Any]], source: str) -> list[Example]:
        out = []
        for index, row in enumerate(rows):
            label = str(row["label"])
            if label not in ("A>B", "B>A"):
                raise DataError(
                    f"{source} row {index}: label must be 'A>B' or 'B>A', got {label!r}",
                    "use the official JudgeBench files",
                )
            source_name = str(row["source"])
            out.append(
                Example(
                    str(row.get("pair_id", row.get("id", index))),
                    judgebench_category(source_name),
                    row["question"],
                    [str(row["response_A"]), str(row["response_B"])],
                    {"label": label, "source": source_name},
                )
            )
        return out

    def score_fields(self, example: Example, scores: list[float], lengths: list[int]) -> dict[str, Any]:
        a_wins = example.meta["label"] == "A>B"
        return {
            "source": example.meta["source"],
            "label": example.meta["label"],
            "score_A": scores[0],
            "score_B": scores[1],
            "score_chosen": scores[0] if a_wins else scores[1],
            "score_rejected": scores[1] if a_wins else scores[0],
            "len_chosen": lengths[0] if a_wins else lengths[1],
            "len_rejected": lengths[1] if a_wins else lengths[0],
        }

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        return score_judgebench(
            [str(r["source"]) for r in rows],
            [str(r["label"]) for r in rows],
            [float(r["score_A"]) for r in rows],
            [float(r["score_B"]) for r in rows],
        )


KIND = JudgeBench()
