"""Listwise: Plackett-Luce over N >= 2 scored responses per prompt (the ranking kept whole).

Trained by rmspec.train.listwise; the plan sizes N sequences per example (N read from the data,
rmspec.plan.recipes.list_size). Validation scores each response with the saved model: pair
accuracy over the list's ordered pairs and Kendall's tau per list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, PositiveInt

from rmspec.approaches.base import SCORE_HEAD, Approach
from rmspec.spec import presets
from rmspec.spec.approach import LIST, ApproachSection
from rmspec.spec.base import Problem
from rmspec.spec.heads import HeadOptionsCheck
from rmspec.spec.row_kinds import RowKind
from rmspec.spec.scorer_kind import ScorerKind

if TYPE_CHECKING:
    from rmspec.spec.root import Spec


class Listwise(HeadOptionsCheck, ApproachSection):
    """Plackett-Luce over N >= 2 scored responses per prompt (UltraFeedback's four ratings kept whole)."""

    no_head_options: ClassVar[str] = (
        "its loss ranks N responses; these heads are trained with the pairwise (Bradley-Terry) loss"
    )
    rows: ClassVar[str] = LIST
    kind: Literal["listwise"]
    loss: Literal["plackett_luce"] = Field(
        "plackett_luce",
        description="The listwise loss: Plackett-Luce (ties in the scores by Breslow's rule).",
    )
    top_k: PositiveInt | None = Field(
        None,
        description="Only the first top_k positions of each labelled ranking contribute; unset: the whole ranking.",
    )
    center_rewards_coefficient: float | None = Field(
        None,
        ge=0,
        description="Weight of the mean squared reward, keeping rewards centred (e.g. 0.01).",
    )

    def problems(self, spec: Spec) -> Iterator[Problem]:
        return list_needs_lists(spec)


def _list_presets() -> str:
    """The presets that give lists, as a hint: `ranked (its columns)` or `X with binarize: ranked`."""
    given = [f"preset: {p.name} ({', '.join(p.columns.values())})" for p in presets.TABLE if p.rows == RowKind.LIST]
    ranked = [f"preset: {p.name} with binarize: ranked" for p in presets.TABLE if p.ranked_from]
    return " or ".join(given + ranked)


def list_needs_lists(spec: Spec) -> Iterator[Problem]:
    preset = presets.get(spec.data.mapping.preset)
    if preset is not None and preset.rows != RowKind.LIST and preset.ranked_from is None:
        yield (
            ("data", "mapping", "preset"),
            f"approach kind listwise needs a prompt with several scored responses; preset {spec.data.mapping.preset!r} "
            "gives another shape",
            f"use {_list_presets()}",
        )
    if preset is not None and preset.ranked_from is not None and spec.data.mapping.binarize != "ranked":
        yield (
            ("data", "mapping", "binarize"),
            "approach kind listwise keeps every rated completion",
            "set data.mapping.binarize: ranked",
        )


class ListwiseApproach(Approach):
    name = "listwise"
    section = Listwise
    scorer = ScorerKind.REWARD
    description = "rankings of N responses, Plackett-Luce loss"
    head = SCORE_HEAD
    sequences_per_example = None  # N: from the data (the plan reads the lists)
    shared_prefix = True
    trains_split = True  # rmspec.train.listwise through context_parallel_run (tests/test_context_parallel_listwise.py)
    packed_row = "listwise training: each prompt computed once, one row [prompt | r_1 | ... | r_N]"
    trainer = "rmspec.train.factory:listwise"
    evaluation = "rmspec.evaluate.approach_validation:evaluate_lists"
    validation_metrics = ("pair_accuracy", "kendall_tau")
    template = "listwise.yaml"
    demo_data = "ranked"

    def split_refusal(self, section: Any) -> str | None:
        # Every listwise option trains split: the split forward gives each rank every list's K rewards whole,
        # and the loss (Plackett-Luce, its top_k, the centring term) reads only those rewards, so each rank
        # computes the one-process loss (tests/test_context_parallel_listwise.py trains top_k and the centring
        # term split). A new option that adds outputs (another head, an LM term) must refuse here until tested.
        if section.loss != "plackett_luce":
            return f"approach.loss {section.loss!r} is not trained split in this version (plackett_luce is)"
        return None

    def plan_notes(self, spec: Any, n_list: int | None, list_how: str | None) -> list[str]:
        return [
            f"listwise: {n_list} responses per prompt ({list_how}); on a decoder with training.packing "
            "auto they share one row [prompt | r_1 | ... | r_N] (the prompt computed once), otherwise each "
            "[prompt | response] is its own sequence"
        ]


APPROACH = ListwiseApproach()
