"""Pointwise: one head output per attribute, regressed on absolute scores (HelpSteer2), or an
ordinal classifier over the integer scale.

Trained by rmspec.train.pointwise; validation scores each response with the saved model: MAE and
Pearson correlation per attribute. `rmspec init --approach pointwise` trains offline on the
shipped rmspec/data/demo/scored.jsonl.
"""

from __future__ import annotations

from typing import Any

from rmspec.approaches.base import SCORE_HEAD, Approach
from rmspec.spec.approach import Pointwise
from rmspec.spec.scorer_kind import ScorerKind


def bins(section: Any) -> int:
    """Classes per attribute of the ordinal objective: the integer scale's points."""
    return int(round(section.scale.max - section.scale.min)) + 1


class PointwiseApproach(Approach):
    name = "pointwise"
    section = Pointwise
    scorer = ScorerKind.POINTWISE  # one output per attribute
    description = "absolute scores per attribute, regression or ordinal"
    head = SCORE_HEAD
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


APPROACH = PointwiseApproach()
