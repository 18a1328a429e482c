"""Process: a process reward model, P(step is correct) at the last token of every step.

A token classifier with 2 labels (TRL's PRMTrainer layout), trained by rmspec.train.process;
validation scores every step with the saved model (rmspec.evaluate.process_run): step F1 (wrong
steps as the positive class) and first-error accuracy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from rmspec.approaches.base import TOKEN_HEAD, Approach
from rmspec.spec import presets
from rmspec.spec.approach import STEPS, ApproachSection
from rmspec.spec.approach_rules import mappings
from rmspec.spec.base import Problem
from rmspec.spec.heads import HeadOptionsCheck
from rmspec.spec.row_kinds import RowKind
from rmspec.spec.scorer_kind import ScorerKind

if TYPE_CHECKING:
    from rmspec.spec.root import Spec


class Process(HeadOptionsCheck, ApproachSection):
    """A process reward model (PRM): P(step is correct) read at the last token of every step.

    The head is a token classifier with 2 labels (0 wrong, 1 correct), exactly what TRL's
    PRMTrainer saves (AutoModelForTokenClassification, num_labels=2) and what vLLM serves as
    `token_classify`; so an rmspec PRM and a TRL PRM load, score and serve the same way. A
    1-output sigmoid head would be equivalent (softmax over 2 logits = sigmoid of their
    difference) but would be unreadable by those tools.
    """

    def extra_needs(self) -> list[tuple[str, str]]:
        return [("approach.kind: process (step AUROC on validation)", "process")]

    no_head_options: ClassVar[str] = (
        "a process reward model scores every step with a token classifier, not one reward head"
    )
    rows: ClassVar[str] = STEPS
    best_metrics: ClassVar[tuple[str, ...]] = (
        "eval/rm/step_accuracy",
        "eval/rm/loss",
        "eval/rm/auroc",
        "eval/rm/first_error_accuracy",
    )
    logged_metrics: ClassVar[tuple[str, ...] | None] = (
        "eval/rm/first_error_accuracy",
        "eval/rm/step_accuracy",
        "eval/rm/auroc",
        "eval/rm/loss",
    )
    kind: Literal["process"]
    step_separator: str = Field(
        "\n",
        min_length=1,
        description="Text appended to every step; the step's label sits on its last token (TRL's default: a newline).",
    )
    train_on: Literal["all_steps", "last_step"] = Field(
        "all_steps",
        description="Learn every step's label, or only the last step's (an outcome model); evaluation always scores every step.",
    )
    threshold: float = Field(
        0.5, gt=0, lt=1, description="A step is predicted wrong when P(correct) < threshold (ProcessBench's rule)."
    )
    tune_threshold: bool = Field(
        False,
        description="Also report the threshold that maximises first-error F1 on the validation split (reported as tuned, never used in place of `threshold`).",
    )

    @property
    def step_suffix(self) -> str:
        return self.step_separator

    def problems(self, spec: Spec) -> Iterator[Problem]:
        return process_needs_steps(spec, self)


def process_needs_steps(spec: Spec, approach: Any) -> Iterator[Problem]:
    """A PRM learns from step lists with one label per step."""
    steps = presets.giving(RowKind.STEPS)
    default = presets.PRESETS[presets.init_default(RowKind.STEPS) or steps[0]]
    for path, mapping in mappings(spec):
        if mapping.preset is not None and mapping.preset not in steps:
            yield (
                (*path, "preset"),
                f"approach kind process needs steps with step labels, but preset {mapping.preset!r} gives {approach.kind} data of another shape",
                f"use one of: {', '.join(steps)}, or map columns.prompt, columns.steps and columns.step_labels",
            )
        elif mapping.preset is None and not (mapping.columns.steps and mapping.columns.step_labels):
            yield (
                (*path, "columns"),
                "approach kind process needs a steps column and a step_labels column (no preset is set)",
                f"map columns.steps and columns.step_labels, or set preset: {default.name} "
                f"({', '.join(default.columns.values())})",
            )
    split = spec.data.split
    if approach.tune_threshold and split.validation_fraction is None and split.validation_source is None:
        yield (
            ("approach", "tune_threshold"),
            "tune_threshold needs a validation split",
            "set data.split.validation_fraction",
        )


# Outputs of the token-classification head, by index (TRL: label 1 = correct).
PROCESS_LABELS = ("wrong", "correct")


class ProcessApproach(Approach):
    name = "process"
    section = Process
    scorer = ScorerKind.PROCESS
    description = "a process reward model: one reward per reasoning step"
    head = TOKEN_HEAD
    # hardware.context_parallel: each example one packed row read at every labelled token (one process keeps padded
    # sequences), split through the forward the others use (rmspec.train.process, tests/test_context_parallel_process.py)
    packs_when_split = True
    trains_split = True
    packed_row = "process: each example one row [prompt + steps], P(correct) read at the last token of every step"
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
