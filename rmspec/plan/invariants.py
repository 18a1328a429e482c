"""What every plan must satisfy before anyone reads it: no negative, NaN or infinite figure anywhere.

A plan's numbers are counts (parameters, processes, steps, tokens), memory (bytes, GB) and time
(seconds, hours): none of them can be below zero or undefined. A spec that gets past validation
can still describe an impossible model (a `model.shape` whose embeddings outweigh its whole
parameter count); the shape check names such a spec's fields, and this check is the net under it
and under every future formula: a plan that breaks it is refused (exit 2) instead of being shown
or run. Light: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rmspec.errors import PlanError
from rmspec.plan.model import Plan

if TYPE_CHECKING:
    from rmspec.plan.shapes import ModelShape


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


def possible_shape(shape: ModelShape) -> None:
    """Refuse a model.shape whose embeddings (and LM head) alone exceed its num_parameters: every count, memory
    and time figure planned from it would go negative (trained = num_parameters - head)."""
    embedding = shape.embedding_parameters()
    head = shape.lm_head_parameters() if shape.architecture == "decoder" else 0
    given = shape.given_num_parameters
    if given is None or embedding + head < given:
        return
    head_text = (
        f" + {head:,} in the untied LM head (vocab_size x hidden_size again), {embedding + head:,} in all"
        if head
        else ""
    )
    raise PlanError(
        f"model.shape is impossible: model.shape.vocab_size {shape.vocab_size:,} x model.shape.hidden_size "
        f"{shape.hidden_size:,} puts {embedding:,} parameters in the embeddings{head_text}: "
        f"not less than model.shape.num_parameters {given:,}",
        hint="model.shape.num_parameters counts the whole model, embeddings included: check it, vocab_size and "
        "hidden_size against the model's config.json (or point model.name_or_path at a folder holding it)",
    )
