"""Shared base for every spec section: unknown keys are refused, nothing is coerced silently."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# What every spec check yields (rmspec.spec.rules and the rule modules beside it): the field's path,
# what is wrong, and how to fix it (None: the message says it). No check changes a value.
Problem = tuple[tuple, str, str | None]


class Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        validate_default=True,
        # Strings stay strings and numbers stay numbers: "1e-5" for a float is
        # accepted (YAML reads 1e-5 as a string), but "yes" for a bool is not.
        str_strip_whitespace=False,
        strict=True,
    )
