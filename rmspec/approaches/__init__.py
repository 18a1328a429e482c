"""The approach registry: an approach's name -> its declaration (rmspec.approaches.base.Approach).

Every approach rmspec trains is one module here and one line in MODULES below. The spec's
`approach:` union, the planner, the data stage, the trainer, the end-of-run evaluation, `init`
and the report read an approach's facts through `get` / `of` instead of testing its kind.

Light (no torch, no datasets): `rmspec validate`, `plan` and `init` import this package; the
heavy hooks each declaration names ("module:function") are imported when a run calls them.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from rmspec.approaches.base import Approach
from rmspec.spec.choices import unknown_choice

# One line per approach, in the order `rmspec init --approach` lists them: rmspec/approaches/<name>.py
# holds its declaration (`APPROACH`).
MODULES = (
    "bradley_terry",
    "listwise",
    "pointwise",
    "generative",
    "process",
)

_registry: dict[str, Approach] = {}
for _module in MODULES:
    _approach = importlib.import_module(f"rmspec.approaches.{_module}").APPROACH
    _registry[_approach.name] = _approach


def _check_sections() -> None:
    """Each shipped approach's section is one the spec accepts (validation runs in rmspec.spec, which
    cannot import this package: the section is listed there)."""
    from rmspec.spec.approach import SECTIONS

    for approach in _registry.values():
        if approach.section not in SECTIONS:
            raise TypeError(
                f"approach {approach.name}: its section {approach.section.__name__} is not in "
                "rmspec.spec.approach.SECTIONS; add it there (see docs/architecture.md, adding an approach)"
            )


_check_sections()

# Approaches from outside rmspec (a plugin, a test): RMSPEC_APPROACHES="package.module,..." names
# modules that each define `APPROACH`; they are registered when this package is first imported
# (rmspec/__init__.py imports it first when the variable is set, so every command and the training
# processes see them).
PLUGINS_ENV = "RMSPEC_APPROACHES"


def _load_plugins() -> None:
    from rmspec.errors import RmspecError

    for name in filter(None, (n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            approach = importlib.import_module(name).APPROACH
        except (ImportError, AttributeError) as exc:
            raise RmspecError(
                f"{PLUGINS_ENV}: cannot load an approach from {name!r}: {exc}",
                "name importable modules that define APPROACH (an rmspec.approaches.base.Approach), comma-separated",
            ) from None
        register(approach)


def names() -> tuple[str, ...]:
    return tuple(_registry)


def get(name: str) -> Approach:
    """The declaration of approach `name` (the spec's approach.kind)."""
    try:
        return _registry[name]
    except KeyError:
        raise ValueError(unknown_choice("approach", name, tuple(_registry))) from None


def of(spec: Any) -> Approach:
    """The declaration of a validated spec's approach."""
    return get(spec.approach.kind)


def register(approach: Approach) -> None:
    """Add an approach at run time (a plugin, a test); shipped approaches are the MODULES lines.
    The spec's `approach:` union then accepts its section."""
    from rmspec.spec.approach import SECTIONS
    from rmspec.spec.root import use_sections

    _registry[approach.name] = approach
    if approach.section not in SECTIONS:
        use_sections([*SECTIONS, approach.section])


def unregister(name: str) -> None:
    from rmspec.spec.approach import SECTIONS
    from rmspec.spec.root import use_sections

    approach = _registry.pop(name, None)
    if approach is not None and approach.section in SECTIONS:
        use_sections([s for s in SECTIONS if s is not approach.section])


_load_plugins()
