"""The official scoring rules of each benchmark, and the figures recomputed from per-example rows.

Each rule lives with its benchmark in rmspec/evaluate/kinds/ (RewardBench v1 and 2, RM-Bench,
JudgeBench, pairs, ProcessBench; each module says which official code it was checked against),
a generative judge's two-game rule in rmspec.evaluate.verdicts; this module gathers them for the
callers that recompute figures (`score_rows`: any figure in a results file from its JSONL rows).

No torch, no numpy: these run on the light side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rmspec.evaluate import registry
from rmspec.evaluate.figures import BenchmarkScore, accuracy_by_subset, pair_correct
from rmspec.evaluate.kinds.judgebench import (
    JUDGEBENCH_CATEGORIES,
    judgebench_category,
    reward_model_decision,
    score_judgebench,
)
from rmspec.evaluate.kinds.pairs import score_pairs
from rmspec.evaluate.kinds.processbench import PROCESSBENCH_SPLITS, first_error, processbench_split, score_processbench
from rmspec.evaluate.kinds.rewardbench import (
    RB1_EXAMPLE_COUNTS,
    RB1_PRIOR_SECTION,
    RB1_PRIOR_SUBSETS,
    RB1_SECTION_WEIGHTS,
    RB1_SECTIONS,
    rewardbench_overall,
    rewardbench_sections,
    score_rewardbench,
)
from rmspec.evaluate.kinds.rewardbench2 import RB2_SUBSETS, best_of_n_credit, score_rewardbench2, ties_score
from rmspec.evaluate.kinds.rm_bench import (
    RM_BENCH_DOMAIN_ALIASES,
    RM_BENCH_STYLES,
    rm_bench_levels,
    rm_bench_matrix,
    score_rm_bench,
)
from rmspec.evaluate.row_readers import read_as
from rmspec.evaluate.verdicts import double_game_outcome, flip_decision, verdict_decision

__all__ = [
    "BenchmarkScore",
    "JUDGEBENCH_CATEGORIES",
    "PROCESSBENCH_SPLITS",
    "RB1_EXAMPLE_COUNTS",
    "RB1_PRIOR_SECTION",
    "RB1_PRIOR_SUBSETS",
    "RB1_SECTIONS",
    "RB1_SECTION_WEIGHTS",
    "RB2_SUBSETS",
    "RM_BENCH_DOMAIN_ALIASES",
    "RM_BENCH_STYLES",
    "accuracy_by_subset",
    "best_of_n_credit",
    "double_game_outcome",
    "first_error",
    "flip_decision",
    "judgebench_category",
    "pair_correct",
    "processbench_split",
    "reward_model_decision",
    "rewardbench_overall",
    "rewardbench_sections",
    "rm_bench_levels",
    "rm_bench_matrix",
    "score_judge",
    "score_judgebench",
    "score_pairs",
    "score_processbench",
    "score_rewardbench",
    "score_rewardbench2",
    "score_rm_bench",
    "score_rows",
    "ties_score",
    "verdict_decision",
]


def score_judge(
    kind: str,
    subsets: Sequence[str],
    labels: Sequence[str],
    verdicts: Sequence[str | None],
    verdicts_swapped: Sequence[str | None],
) -> BenchmarkScore:
    """A generative judge on benchmark `kind`: JudgeBench's two games, with the kind's sections."""
    from rmspec.evaluate.verdicts import score_two_games

    return score_two_games(kind, subsets, labels, verdicts, verdicts_swapped, registry.get(kind).judge_section)


def score_rows(kind: str, rows: Iterable[Mapping[str, Any]], scorer: str | None = None) -> BenchmarkScore:
    """Recompute a benchmark's figures from its per-example JSONL rows (the files in RUN/eval/).

    scorer: the model that wrote the rows (rmspec.spec.benchmarks REWARD / JUDGE / PROCESS);
    None: read from the rows (rmspec.evaluate.row_readers.read_as).
    """
    rows = list(rows)
    return read_as(kind, rows, scorer).score(kind, rows)
