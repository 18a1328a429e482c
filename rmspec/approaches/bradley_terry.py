"""Bradley-Terry: one reward per response, trained on preference pairs (-log sigmoid(r_chosen - r_rejected)).

Options on the section (rmspec.spec.approach.BradleyTerry): a margin, ties (Davidson), the SFT
term, ODIN's length head and an ensemble of heads. Trained by rmspec.train.bradley_terry
(rmspec.train.heads for ODIN and ensembles); its validation split is scored pair by pair with
the saved model (rmspec.evaluate.approach_validation.pairs).
"""

from __future__ import annotations

from typing import Any

from rmspec.approaches.base import LM_HEAD, SCORE_HEAD, Approach
from rmspec.spec import presets
from rmspec.spec.approach import BradleyTerry
from rmspec.spec.heads import head_labels, head_outputs
from rmspec.spec.scorer_kind import ScorerKind


class BradleyTerryApproach(Approach):
    name = "bradley_terry"
    section = BradleyTerry
    scorer = ScorerKind.REWARD
    description = "pairwise preferences, Bradley-Terry loss"
    head = SCORE_HEAD
    sequences_per_example = 2
    shared_prefix = True
    packed_row = "Bradley-Terry: each prompt computed once per pair, one row [prompt | chosen | rejected]"
    trainer = "rmspec.train.factory:bradley_terry"
    evaluation = "rmspec.evaluate.approach_validation:evaluate_pairs"
    validation_metrics = ("accuracy",)
    finalize = "rmspec.train.heads:finalize_for_spec"  # ODIN / an ensemble: one output saved
    template = "bradley_terry.yaml"
    demo_data = "demo"

    def init_document(self, doc: dict[str, Any], mapping: dict[str, Any]) -> None:
        preset = presets.get(mapping.get("preset"))
        if preset is not None and preset.pairs_by_attribute:  # scored responses: pairs by one attribute
            doc["data"]["mapping"]["pair_by"] = preset.attributes[0]

    def num_outputs(self, section: Any) -> int:
        return head_outputs(section)  # ODIN: 2 heads, an ensemble: N, while training

    def output_labels(self, section: Any) -> list[str]:
        return head_labels(section)

    def uses_lm_head(self, section: Any) -> bool:
        return self.head == LM_HEAD or section.sft_weight > 0

    def plan_notes(self, spec: Any, n_list: int | None, list_how: str | None) -> list[str]:
        section = spec.approach
        if not section.sft_weight:
            return []
        return [
            f"sft_weight {section.sft_weight}: the LM head is kept during training (sized here: its "
            "weights, and its logits over the chosen sequence); the saved model is the score head only"
        ]

    def config_extra(self, spec: Any) -> dict[str, Any]:
        section = spec.approach
        option = "length_debias" if section.length_debias else "ensemble" if section.ensemble else None
        return {option: getattr(section, option).model_dump()} if option else {}


APPROACH = BradleyTerryApproach()
