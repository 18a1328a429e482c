"""What every plan must satisfy before anyone reads it: no negative, NaN or infinite figure anywhere.

A plan's numbers are counts (parameters, processes, steps, tokens), memory (bytes, GB) and time
(seconds, hours): none of them can be below zero or undefined. A spec that gets past validation
can still describe an impossible model (a `model.shape` whose embeddings outweigh its whole
parameter count); the shape check (rmspec.plan.shape_source.possible_shape) names such a spec's fields,
and this check is the net under it and under every future formula: a plan that breaks it is refused (exit 2) instead of being shown
or run. Light: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.plan import Plan


def bad_figures(document: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """(dotted path, value) of each number in a plan document that is negative, NaN or infinite."""
    if isinstance(document, Mapping):
        for key, value in document.items():
            yield from bad_figures(value, f"{path}.{key}" if path else str(key))
    elif isinstance(document, (list, tuple)):
        for i, value in enumerate(document):
            yield from bad_figures(value, f"{path}[{i}]")
    elif (
        isinstance(document, (int, float))
        and not isinstance(document, bool)
        and (not math.isfinite(document) or document < 0)
    ):
        yield path, document


def checked(plan: Plan) -> Plan:
    """The plan itself, or PlanError naming every impossible figure in it."""
    found = list(bad_figures(plan.to_json()))
    if found:
        shown = "\n".join(f"  {where} = {value:,}" for where, value in found[:12])
        more = f"\n  ... and {len(found) - 12} more" if len(found) > 12 else ""
        raise PlanError(
            f"the plan for {plan.name} holds impossible figures (negative or not a number):\n{shown}{more}",
            hint="check the model's size: model.shape (num_parameters counts the whole model, embeddings "
            "included) or the config.json it was read from; if the spec is right, this is a bug in rmspec",
        )
    return plan
