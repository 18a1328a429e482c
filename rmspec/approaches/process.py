"""Process: a process reward model, P(step is correct) at the last token of every step.

A token classifier with 2 labels (TRL's PRMTrainer layout), trained by rmspec.train.process;
validation scores every step with the saved model (rmspec.evaluate.process_run): step F1 (wrong
steps as the positive class) and first-error accuracy.
"""

from __future__ import annotations

from typing import Any

from rmspec.approaches.base import TOKEN_HEAD, Approach
from rmspec.spec.approach import Process
from rmspec.spec.scorer_kind import ScorerKind

# Outputs of the token-classification head, by index (TRL: label 1 = correct).
PROCESS_LABELS = ("wrong", "correct")


class ProcessApproach(Approach):
    name = "process"
    section = Process
    scorer = ScorerKind.PROCESS
    description = "a process reward model: one reward per reasoning step"
    head = TOKEN_HEAD
    trainer = "rmspec.train.factory:process"
    auto_model = "token_classification"
    lora_task = "TOKEN_CLS"
    evaluation = "rmspec.evaluate.process_run:evaluate_process_run"
    validation_metrics = ("step_f1", "first_error_accuracy")
    template = "process.yaml"
    demo_data = "prm-demo"

    def reward_weights(self, section: Any) -> list[float] | None:
        return None  # per-step probabilities, not a reward to normalise

    def num_outputs(self, section: Any) -> int:
        return len(PROCESS_LABELS)

    def output_labels(self, section: Any) -> list[str]:
        return list(PROCESS_LABELS)

    def config_extra(self, spec: Any) -> dict[str, Any]:
        # what a bare model folder needs to score steps as training did
        return {
            "step_separator": spec.approach.step_separator,
            "threshold": spec.approach.threshold,
            "chat_template": spec.data.mapping.chat_template,
        }


APPROACH = ProcessApproach()
