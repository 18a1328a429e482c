"""Listwise: Plackett-Luce over N >= 2 scored responses per prompt (the ranking kept whole).

Trained by rmspec.train.listwise; the plan sizes N sequences per example (N read from the data,
rmspec.plan.recipes.list_size). Validation scores each response with the saved model: pair
accuracy over the list's ordered pairs and Kendall's tau per list.
"""

from __future__ import annotations

from typing import Any

from rmspec.approaches.base import SCORE_HEAD, Approach
from rmspec.spec.approach import Listwise
from rmspec.spec.scorer_kind import ScorerKind


class ListwiseApproach(Approach):
    name = "listwise"
    section = Listwise
    scorer = ScorerKind.REWARD
    description = "rankings of N responses, Plackett-Luce loss"
    head = SCORE_HEAD
    sequences_per_example = None  # N: from the data (the plan reads the lists)
    shared_prefix = True
    packed_row = "listwise training: each prompt computed once, one row [prompt | r_1 | ... | r_N]"
    trainer = "rmspec.train.factory:listwise"
    evaluation = "rmspec.evaluate.approach_validation:evaluate_lists"
    validation_metrics = ("pair_accuracy", "kendall_tau")
    template = "listwise.yaml"
    demo_data = "ranked"

    def plan_notes(self, spec: Any, n_list: int | None, list_how: str | None) -> list[str]:
        return [
            f"listwise: {n_list} responses per prompt ({list_how}); on a decoder with training.packing "
            "auto they share one row [prompt | r_1 | ... | r_N] (the prompt computed once), otherwise each "
            "[prompt | response] is its own sequence"
        ]


APPROACH = ListwiseApproach()
