"""What one component gives for one row: a value, or a failure with its reason. Never a silent 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmspec.spec.composite_component import FAILURE_REASONS


@dataclass(frozen=True)
class Outcome:
    value: float | None = None
    reason: str | None = None  # one of FAILURE_REASONS when value is None
    detail: str | None = None  # what failed, for the rejects file and logs (never a request body)

    def __post_init__(self) -> None:
        if (self.value is None) == (self.reason is None):
            raise ValueError("an Outcome holds a value or a failure reason, not both or neither")
        if self.reason is not None and self.reason not in FAILURE_REASONS:
            raise ValueError(f"unknown failure reason {self.reason!r}; known: {FAILURE_REASONS}")

    @property
    def failed(self) -> bool:
        return self.value is None


def ok(value: float) -> Outcome:
    return Outcome(value=float(value))


def failed(reason: str, detail: str | None = None) -> Outcome:
    return Outcome(reason=reason, detail=detail)


@dataclass(frozen=True)
class Item:
    """One row as the components see it.

    `prompt` is text or chat messages; `reference` is the row's label (None: none given);
    `route` the value of the composite's route_by column, `query` the whole templated text an RL
    trainer sent (OpenRLHF), which a trained model scores as its own server would.
    """

    prompt: Any
    response: str
    reference: Any = None
    route: str | None = None
    query: str | None = None
