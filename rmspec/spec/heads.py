"""`approach.length_debias` and `approach.ensemble`: options that add score heads to a Bradley-Terry
model (rmspec.train.heads trains them; the saved model is still a plain one-output classifier)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveFloat, model_validator

from rmspec.spec.base import Section

# The options only Bradley-Terry's section takes; each other section says why it cannot
# (`no_head_options`, rmspec.spec.approach), and the spec error quotes it.
HEAD_OPTIONS = ("length_debias", "ensemble")


class LengthDebias(Section):
    """ODIN (Chen et al. 2024): a quality head and a length head on the same features; only the quality
    head is saved as the reward. "Length" is the response's own token count."""

    kind: Literal["odin"]
    lambda_length: PositiveFloat = Field(1.0, description="Weight of 1 - rho(length head, response length).")
    lambda_quality: PositiveFloat = Field(1.0, description="Weight of |rho(quality head, response length)|.")
    lambda_ortho: float = Field(
        1.0, ge=0, description="Weight of |cos(w_quality, w_length)|, the heads' orthogonality."
    )


class Ensemble(Section):
    """N score heads on one shared backbone (heads, not LoRA adapters), each trained on its own seeded
    resample of the training pairs; the reward is their mean."""

    members: int = Field(ge=2, le=64, description="Number of heads (members), 2 to 64.")
    bootstrap: bool = Field(
        True,
        description="Each member trains on a bootstrap resample of the pairs (seeded by training.seed); "
        "false: every member sees every pair and the members differ only by their initialisation.",
    )


def refuse_head_options(data: Any, kind: str, why: str) -> Any:
    """A `mode="before"` check for the approaches that cannot take these options: one clear message
    instead of pydantic's "extra inputs are not permitted"."""
    if isinstance(data, dict):
        for name in HEAD_OPTIONS:
            if name in data:
                raise ValueError(f"approach.{name} applies to kind: bradley_terry only, not {kind}: {why}")
    return data


class HeadOptionsCheck:
    """Mixin for approach sections that refuse length_debias / ensemble by name, saying why."""

    no_head_options: ClassVar[str] = "these heads are trained with the pairwise (Bradley-Terry) loss"

    @model_validator(mode="before")
    @classmethod
    def _no_head_options(cls, data: Any) -> Any:
        kind = data.get("kind") if isinstance(data, dict) else None
        return refuse_head_options(data, str(kind), cls.no_head_options)


def head_option_conflicts(approach: Any) -> list[str]:
    """What a Bradley-Terry section with length_debias or ensemble cannot combine (not built: say so)."""
    problems = []
    if approach.length_debias is not None and approach.ensemble is not None:
        problems.append("length_debias and ensemble together are not supported; choose one")
    which = "length_debias" if approach.length_debias is not None else "ensemble"
    if approach.ties != "reject":
        problems.append(f"{which} trains the plain Bradley-Terry loss; ties: {approach.ties} is not combined with it")
    if approach.margin_mode == "scale":
        problems.append(f"{which} takes margin: subtract (or none); margin: scale is not combined with it")
    if approach.sft_weight:
        problems.append(f"{which} is not combined with sft_weight")
    return problems


def head_outputs(approach: Any) -> int:
    """Outputs of the head a Bradley-Terry model (its section: the only one with these options) trains
    with: 2 for ODIN (quality, length), N for an ensemble, else 1. The saved model always has 1
    (rmspec.train.heads.finalize_heads). Other approaches: ApproachSection.trained_heads."""
    if approach.length_debias is not None:
        return 2
    if approach.ensemble is not None:
        return int(approach.ensemble.members)
    return 1


def head_labels(approach: Any) -> list[str]:
    """config.id2label while training (checkpoints): what each output of the widened head is."""
    if approach.length_debias is not None:
        return ["reward", "length"]
    n = head_outputs(approach)
    return ["reward"] if n == 1 else [f"member_{i}" for i in range(n)]
