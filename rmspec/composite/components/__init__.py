"""The component kinds of a composite reward: one module per kind, looked up by its `kind`.

Each module has `build(settings, context) -> component`, where a component has `needs_reference`
and `score(items) -> [Outcome]` (one per item, in order). Modules import their heavy libraries
(math-verify, jsonschema, transformers, httpx) inside `build` or `score`.

The shipped kinds' settings are the union in rmspec.spec.composite, each computed by the module of
its kind's name here. A kind from outside rmspec is one module holding its settings class
(`SETTINGS`, a rmspec.spec.composite_component.ComponentBase with a `kind` literal) and `build`, plus one
line: `register("package.module")`; the composite spec accepts its kind from then on.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol, get_args

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome
from rmspec.spec.composite import COMPONENT_SETTINGS, ComponentSettings, kind_of
from rmspec.spec.composite_spec import use_components

# The kinds the spec's component union accepts, in its order: a module here per kind.
KINDS: tuple[str, ...] = tuple(
    get_args(settings.model_fields["kind"].annotation)[0] for settings in get_args(get_args(ComponentSettings)[0])
)


class Component(Protocol):
    needs_reference: bool

    def score(self, items: Sequence[Item]) -> list[Outcome]: ...


# kind -> the module that computes it: the shipped kinds, then the registered ones.
_MODULES: dict[str, str] = {kind: f"rmspec.composite.components.{kind}" for kind in KINDS}


def register(module: str) -> str:
    """Add the component kind `module` defines (its `SETTINGS` and `build`); returns the kind. A kind
    another module already computes (a shipped one included) is refused (rmspec.plugin_clash)."""
    from rmspec.plugin_clash import refuse_clash

    settings = importlib.import_module(module).SETTINGS
    kind = kind_of(settings)
    refuse_clash("reward component kind", kind, _MODULES.get(kind), module)
    _MODULES[kind] = module
    use_components([s for s in COMPONENT_SETTINGS if kind_of(s) != kind] + [settings])
    return kind


def unregister(kind: str) -> None:
    """Remove a registered kind (a test's, when it is done); the shipped kinds stay."""
    if kind in KINDS:
        raise ValueError(f"{kind!r} is a shipped component kind")
    _MODULES.pop(kind, None)
    use_components([s for s in COMPONENT_SETTINGS if kind_of(s) != kind])


def kinds() -> tuple[str, ...]:
    """Every kind `components:` accepts now, the shipped ones first."""
    return tuple(_MODULES)


def build(settings: Any, context: Context) -> Component:
    """The component a spec entry describes (its `kind` names the module)."""
    if settings.kind not in _MODULES:
        raise KeyError(f"unknown component kind {settings.kind!r}; known: {', '.join(_MODULES)}")
    module = importlib.import_module(_MODULES[settings.kind])
    component: Component = module.build(settings, context)
    return component
