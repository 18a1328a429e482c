"""`data.filters` and `data.augment`: rows dropped (each counted in rejects) and extra training pairs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section


class MaxLengthFilter(Section):
    kind: Literal["max_length"]
    max_tokens: PositiveInt | None = Field(
        None, description="Token limit per sequence; defaults to training.max_length."
    )
    policy: Literal["drop", "truncate_prompt_left", "truncate_response"] = Field(
        "truncate_prompt_left",
        description="Over-long rows: drop them (counted in rejects), cut the prompt from the left keeping responses whole, or cut the responses.",
    )


class DropIdenticalFilter(Section):
    kind: Literal["drop_identical"]


class DropEmptyFilter(Section):
    kind: Literal["drop_empty"]


class DedupFilter(Section):
    kind: Literal["dedup"]
    on: Literal["row", "prompt"] = Field("row", description="Exact duplicates of the whole row, or of the prompt.")


class RegexFilter(Section):
    kind: Literal["regex"]
    field: Literal["prompt", "chosen", "rejected", "response", "any"] = Field(description="Canonical field to match.")
    pattern: str = Field(description="Python regular expression.")
    action: Literal["include", "exclude"] = Field("exclude", description="Keep only matches, or drop matches.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        import re

        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return pattern


class MinScoreGapFilter(Section):
    kind: Literal["min_score_gap"]
    gap: float = Field(gt=0, description="Drop pairs whose margin/score gap is below this.")


class SampleFilter(Section):
    kind: Literal["sample"]
    n: PositiveInt | None = Field(None, description="Keep this many rows.")
    fraction: float | None = Field(None, gt=0, le=1, description="Keep this fraction of rows.")
    seed: int = Field(0, description="Sampling seed.")

    @model_validator(mode="after")
    def _one(self) -> SampleFilter:
        if (self.n is None) == (self.fraction is None):
            raise ValueError("give exactly one of n or fraction")
        return self


Filter = Annotated[
    MaxLengthFilter
    | DropIdenticalFilter
    | DropEmptyFilter
    | DedupFilter
    | RegexFilter
    | MinScoreGapFilter
    | SampleFilter,
    Field(discriminator="kind"),
]

# ---------------------------------------------------------------- augmentation


class CrossPromptNegatives(Section):
    kind: Literal["cross_prompt_negatives"]
    fraction: float = Field(0.1, gt=0, le=1, description="Extra pairs as a fraction of the rows.")
    seed: int = Field(0, description="Seed.")


class TruncatedNegatives(Section):
    kind: Literal["truncated_negatives"]
    fraction: float = Field(0.1, gt=0, le=1, description="Extra pairs as a fraction of the rows.")
    keep: float = Field(0.5, gt=0, lt=1, description="Share of the chosen response kept in the negative.")
    seed: int = Field(0, description="Seed.")


class PairsFromScores(Section):
    kind: Literal["pairs_from_scores"]
    attribute: str | None = Field(
        None,
        description="Informational (a check, never a choice): names the score the pairs are built from, which "
        "the mapping decides; omit it, or write score (each pair's score_chosen/score_rejected: data.mapping.columns."
        "score_chosen/score_rejected, ultrafeedback's and shp's scores) or, for helpsteer2, the pair_by attribute. "
        "Any other value is refused.",
    )
    min_gap: float = Field(1.0, gt=0, description="Smallest score difference that makes a pair.")


Augment = Annotated[CrossPromptNegatives | TruncatedNegatives | PairsFromScores, Field(discriminator="kind")]
