"""The component kinds of a composite reward: one module per kind, looked up by its `kind`.

Each module has `build(settings, context) -> component`, where a component has `needs_reference`
and `score(items) -> [Outcome]` (one per item, in order). Modules import their heavy libraries
(math-verify, jsonschema, transformers, httpx) inside `build` or `score`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol, get_args

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome
from rmspec.spec.composite import ComponentSettings

# The kinds the spec's component union accepts, in its order: a module here per kind.
KINDS: tuple[str, ...] = tuple(
    get_args(settings.model_fields["kind"].annotation)[0] for settings in get_args(get_args(ComponentSettings)[0])
)


class Component(Protocol):
    needs_reference: bool

    def score(self, items: Sequence[Item]) -> list[Outcome]: ...


def build(settings: Any, context: Context) -> Component:
    """The component a spec entry describes (its `kind` names the module)."""
    if settings.kind not in KINDS:
        raise KeyError(f"unknown component kind {settings.kind!r}; known: {', '.join(KINDS)}")
    module = importlib.import_module(f"rmspec.composite.components.{settings.kind}")
    component: Component = module.build(settings, context)
    return component
