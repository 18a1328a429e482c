"""Generative: a causal LM judge that writes a verdict ([[A]] or [[B]]) for a pair.

Trained by rmspec.train.generative (next-token loss on the judge's answer); validation judges each
held-out pair in both orders with the saved model (rmspec.inference.judge): verdict accuracy in the
written order, with the responses swapped, and in both.
"""

from __future__ import annotations

from typing import Any

from rmspec.approaches.base import LM_HEAD, Approach
from rmspec.spec.approach import Generative
from rmspec.spec.scorer_kind import ScorerKind


class GenerativeApproach(Approach):
    name = "generative"
    section = Generative
    scorer = ScorerKind.JUDGE
    description = "a judge model writing verdicts"
    head = LM_HEAD
    causal_lm = True
    trainer = "rmspec.train.factory:generative"
    metric_family = "sft"
    final_metrics = "rmspec.train.generative:final_metrics"
    auto_model = "causal_lm"
    lora_task = "CAUSAL_LM"
    evaluation = "rmspec.evaluate.judge_run:evaluate_judge"
    validation_metrics = ("verdict_accuracy_first_order", "verdict_accuracy_swapped_order", "verdict_accuracy")
    # a judge trained by GRPO (approach.method: grpo; the exporter refuses others): its training for verl
    exporter = "rmspec.train.judge_export:export_judge"
    export_targets = ("verl",)
    export_writes = "dir"
    template = "generative.yaml"
    demo_data = "judge-demo"

    def config_extra(self, spec: Any) -> dict[str, Any]:
        return {"verdict_pattern": spec.approach.verdict_pattern}


APPROACH = GenerativeApproach()
