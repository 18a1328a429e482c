"""`approach:` how the reward model learns: pairwise Bradley-Terry, pointwise scores, a generative judge,
or a process reward model (one reward per reasoning step)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section


class BradleyTerry(Section):
    kind: Literal["bradley_terry"]
    use_margin: bool = Field(
        False, description="Subtract the mapped per-pair margin inside the loss (Llama 2 style)."
    )
    center_rewards_coefficient: float | None = Field(
        None, ge=0, description="Weight of mean((r_chosen + r_rejected)^2), keeping rewards centred (e.g. 0.01)."
    )


class ScoreScale(Section):
    min: float = Field(0.0, description="Lowest score on the scale.")
    max: float = Field(4.0, description="Highest score on the scale.")

    @model_validator(mode="after")
    def _ordered(self) -> "ScoreScale":
        if self.max <= self.min:
            raise ValueError(f"max must be greater than min (got min={self.min}, max={self.max})")
        return self


class Pointwise(Section):
    kind: Literal["pointwise"]
    attributes: list[str] = Field(
        min_length=1, description="Score attributes to learn, each a key of data.mapping.columns.scores (or the preset's)."
    )
    weights: dict[str, float] | None = Field(
        None, description="Attribute -> weight for the single reward; default equal weights."
    )
    objective: Literal["regression", "ordinal"] = Field(
        "regression", description="MSE regression, or ordinal classification over the integer scale."
    )
    scale: ScoreScale = Field(default_factory=ScoreScale, description="The score scale (HelpSteer2: 0 to 4).")


class Generative(Section):
    kind: Literal["generative"]
    output: Literal["verdict", "score"] = Field(
        "verdict", description="What the judge writes: a verdict (A or B) or a numeric score."
    )
    verdict_pattern: str = Field(
        r"\[\[(A|B)\]\]", description="Regex whose first group is the verdict or score in the generated text."
    )
    max_new_tokens: PositiveInt = Field(64, description="Generation budget at evaluation.")

    @field_validator("verdict_pattern")
    @classmethod
    def _one_group(cls, pattern: str) -> str:
        import re

        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        if compiled.groups < 1:
            raise ValueError("the pattern needs a capture group around the verdict, e.g. \\[\\[(A|B)\\]\\]")
        return pattern


class Process(Section):
    """A process reward model (PRM): P(step is correct) read at the last token of every step.

    The head is a token classifier with 2 labels (0 wrong, 1 correct), exactly what TRL's
    PRMTrainer saves (AutoModelForTokenClassification, num_labels=2) and what vLLM serves as
    `token_classify`; so an rmspec PRM and a TRL PRM load, score and serve the same way. A
    1-output sigmoid head would be equivalent (softmax over 2 logits = sigmoid of their
    difference) but would be unreadable by those tools.
    """

    kind: Literal["process"]
    step_separator: str = Field(
        "\n", min_length=1,
        description="Text appended to every step; the step's label sits on its last token (TRL's default: a newline).",
    )
    train_on: Literal["all_steps", "last_step"] = Field(
        "all_steps", description="Learn every step's label, or only the last step's (an outcome model); evaluation always scores every step."
    )
    threshold: float = Field(
        0.5, gt=0, lt=1, description="A step is predicted wrong when P(correct) < threshold (ProcessBench's rule)."
    )
    tune_threshold: bool = Field(
        False, description="Also report the threshold that maximises first-error F1 on the validation split (reported as tuned, never used in place of `threshold`).",
    )


Approach = Annotated[Union[BradleyTerry, Pointwise, Generative, Process], Field(discriminator="kind")]
