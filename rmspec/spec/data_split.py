"""`data.split`: the seeded train/validation split, or a separate validation source."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from rmspec.spec.base import Section
from rmspec.spec.data_sources import Source


class SplitSpec(Section):
    validation_fraction: float | None = Field(
        0.05,
        gt=0,
        lt=1,
        description="Seeded share of prompts held out for validation (off when validation_source is given).",
    )
    validation_source: Source | None = Field(
        None, description="A separate source for validation (e.g. the hub's test split) instead of a fraction."
    )
    group_by_prompt: bool = Field(True, description="Keep all rows of one prompt on one side (no leakage).")
    stratify_by: str | None = Field(
        None, description="Canonical column to stratify by (e.g. group, which needs data.mapping.columns.group)."
    )
    seed: int = Field(0, description="Split seed.")

    @model_validator(mode="before")
    @classmethod
    def _source_replaces_fraction(cls, value: Any) -> Any:
        # The fraction's default (0.05) is for specs that name no split at all: a spec that gives only a
        # validation_source means "validate on that", not "refuse because both are set".
        if (
            isinstance(value, dict)
            and value.get("validation_source") is not None
            and "validation_fraction" not in value
        ):
            return {**value, "validation_fraction": None}
        return value
