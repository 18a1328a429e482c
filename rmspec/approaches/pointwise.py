"""Pointwise: one head output per attribute, regressed on absolute scores (HelpSteer2), or an
ordinal classifier over the integer scale.

Trained by rmspec.train.pointwise (split over a context-parallel group too: each example one packed
row); validation scores each response with the saved model: MAE and Pearson correlation per
attribute. `rmspec init --approach pointwise` trains offline on the shipped
rmspec/data/demo/scored.jsonl.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from rmspec.approaches.base import SCORE_HEAD, Approach
from rmspec.spec import presets
from rmspec.spec.approach import SCORED, ApproachSection
from rmspec.spec.approach_rules import mappings
from rmspec.spec.base import Problem, Section
from rmspec.spec.heads import HeadOptionsCheck
from rmspec.spec.row_kinds import RowKind
from rmspec.spec.scorer_kind import ScorerKind

if TYPE_CHECKING:
    from rmspec.spec.root import Spec


class ScoreScale(Section):
    min: float = Field(0.0, description="Lowest score on the scale.")
    max: float = Field(4.0, description="Highest score on the scale.")

    @model_validator(mode="after")
    def _ordered(self) -> ScoreScale:
        if self.max <= self.min:
            raise ValueError(f"max must be greater than min (got min={self.min}, max={self.max})")
        return self


class Pointwise(HeadOptionsCheck, ApproachSection):
    no_head_options: ClassVar[str] = (
        "its heads regress scores; these heads are trained with the pairwise (Bradley-Terry) loss"
    )
    rows: ClassVar[str] = SCORED
    best_metrics: ClassVar[tuple[str, ...]] = ("eval/rm/loss", "eval/rm/mse", "eval/rm/mae", "eval/rm/accuracy")
    kind: Literal["pointwise"]
    attributes: list[str] = Field(
        min_length=1,
        description="Score attributes to learn, each a key of data.mapping.columns.scores (or the preset's).",
    )
    weights: dict[str, float] | None = Field(
        None, description="Attribute -> weight for the single reward; default equal weights."
    )
    objective: Literal["regression", "ordinal"] = Field(
        "regression", description="MSE regression, or ordinal classification over the integer scale."
    )
    scale: ScoreScale = Field(default_factory=ScoreScale, description="The score scale (HelpSteer2: 0 to 4).")

    @property
    def score_attributes(self) -> list[str]:
        return list(self.attributes)

    def problems(self, spec: Spec) -> Iterator[Problem]:
        return scores_needed(spec, self)


def scores_needed(spec: Spec, approach: Any) -> Iterator[Problem]:
    for path, mapping in mappings(spec):
        yield from _scores(approach, path, mapping)


def _scores(approach: Any, path: tuple, mapping: Any) -> Iterator[Problem]:
    scores = mapping.columns.scores
    preset = presets.get(mapping.preset)
    if preset is not None and preset.rows == RowKind.SCORED and mapping.pair_by is None:
        available = set(scores or {}) | set(preset.attributes)
    elif scores:
        available = set(scores)
    else:
        yield (
            path,
            f"the pointwise approach needs scores, but the mapping gives none (preset: {mapping.preset})",
            f"use preset: {' or '.join(presets.giving(RowKind.SCORED))}, or map columns.response and "
            "columns.scores: {attribute: column}",
        )
        return
    for i, attr in enumerate(approach.attributes):
        if attr not in available:
            yield (
                ("approach", "attributes", i),
                f"attribute {attr!r} is not among the mapped scores ({', '.join(sorted(available))})",
                "add it to data.mapping.columns.scores or remove it here",
            )
    for name in approach.weights or {}:
        if name not in approach.attributes:
            yield (("approach", "weights", name), f"weight for {name!r}, which is not in approach.attributes", None)


def bins(section: Any) -> int:
    """Classes per attribute of the ordinal objective: the integer scale's points."""
    return int(round(section.scale.max - section.scale.min)) + 1


class PointwiseApproach(Approach):
    name = "pointwise"
    section = Pointwise
    scorer = ScorerKind.POINTWISE  # one output per attribute
    description = "absolute scores per attribute, regression or ordinal"
    head = SCORE_HEAD
    # hardware.context_parallel: each example one packed row of one response (one process keeps padded sequences),
    # split through the forward pairs and lists use (rmspec.train.pointwise, tests/test_context_parallel_pointwise.py)
    packs_when_split = True
    trains_split = True
    packed_row = "pointwise: each example one row [prompt + response], its scores read at its last token"
    trainer = "rmspec.train.factory:pointwise"
    evaluation = "rmspec.evaluate.approach_validation:evaluate_scores"
    template = "pointwise.yaml"
    demo_data = "scored-demo"

    def validation_metric_names(self, section: Any) -> tuple[str, ...]:
        return tuple(f"{a}/{m}" for a in section.attributes for m in ("mae", "pearson"))

    def init_document(self, doc: dict[str, Any], mapping: dict[str, Any]) -> None:
        if "columns" in mapping:  # a file of plain columns: its one `score` column
            doc["approach"]["attributes"] = ["score"]

    def reward_weights(self, section: Any) -> list[float] | None:
        weights = section.weights or {}
        return [weights.get(a, 1.0 if not weights else 0.0) for a in section.attributes]

    def num_outputs(self, section: Any) -> int:
        per = bins(section) if section.objective == "ordinal" else 1
        return len(section.attributes) * per

    def output_labels(self, section: Any) -> list[str]:
        if section.objective == "ordinal":
            low = section.scale.min
            return [f"{a}={low + b:g}" for a in section.attributes for b in range(bins(section))]
        return list(section.attributes)

    def config_extra(self, spec: Any) -> dict[str, Any]:
        section = spec.approach
        return {
            "attributes": list(section.attributes),
            "weights": section.weights,
            "objective": section.objective,
            "scale": section.scale.model_dump(),
        }

    def image_refusal(self, section: Any) -> str | None:
        return None  # rmspec.vision.collate.VisionScoresCollator


APPROACH = PointwiseApproach()
