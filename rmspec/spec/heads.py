"""`approach.length_debias` and `approach.ensemble` add score heads to a Bradley-Terry model (their
options: rmspec.approaches.bradley_terry); every other section refuses them by name, saying why
(`HeadOptionsCheck` here, a mixin of the spec's sections)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import model_validator

# The options only Bradley-Terry's section takes; each other section says why it cannot
# (`no_head_options`, rmspec.spec.approach), and the spec error quotes it.
HEAD_OPTIONS = ("length_debias", "ensemble")


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
