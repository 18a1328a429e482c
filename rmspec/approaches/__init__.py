"""The approach registry: an approach's name -> its declaration (rmspec.approaches.base.Approach).

Every approach rmspec trains is one module here (its spec section, options and rules included, and
its declaration) and one line in MODULES below. The spec's `approach:` union is built from the
sections registered here (rmspec.spec.root.use_sections); the planner, the data stage, the trainer,
the end-of-run evaluation, `init` and the report read an approach's facts through `get` / `of`
instead of testing its kind.

Approaches from outside rmspec register through the `rmspec.approaches` entry-point group (a
package's pyproject: `[project.entry-points."rmspec.approaches"] toy = "toy_rm.approach"`, a module
that defines `APPROACH`), as data sources do through `rmspec.sources`; RMSPEC_APPROACHES does the same
for modules that are importable but not installed (see PLUGINS_ENV).

Light (no torch, no datasets): `rmspec validate`, `plan` and `init` import this package; the
heavy hooks each declaration names ("module:function") are imported when a run calls them.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from rmspec.approaches.base import Approach
from rmspec.plugin_clash import refuse_clash
from rmspec.spec.choices import unknown_choice
from rmspec.spec.root import use_sections

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
_homes: dict[str, str] = {}  # an approach's name -> the module that declares it (a clash names both)


def _add(approach: Approach, module: str, where: str = "") -> None:
    refuse_clash("approach", approach.name, _homes.get(approach.name), module, where)
    _registry[approach.name] = approach
    _homes[approach.name] = module


for _module in MODULES:
    _add(importlib.import_module(f"rmspec.approaches.{_module}").APPROACH, f"rmspec.approaches.{_module}")

# Approaches from outside rmspec, each a module that defines `APPROACH`: the entry points of the
# `rmspec.approaches` group (installed packages), then RMSPEC_APPROACHES="package.module,..." (modules
# importable from PYTHONPATH but not installed: a test, a plugin tried before it is packaged). Both
# are registered when this package is first imported (rmspec/__init__.py imports it first, so every
# command and the training processes see them).
ENTRY_POINTS = "rmspec.approaches"
PLUGINS_ENV = "RMSPEC_APPROACHES"


def _plugin_modules() -> list[tuple[str, str]]:
    """(where it was named, module path) of every outside approach."""
    from importlib.metadata import entry_points

    named = [(f"entry point {ep.name!r} of group {ENTRY_POINTS}", ep.value) for ep in entry_points(group=ENTRY_POINTS)]
    env = filter(None, (n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",")))
    return named + [(PLUGINS_ENV, name) for name in env]


def _load_plugins() -> None:
    from rmspec.errors import RmspecError

    for where, value in _plugin_modules():
        module, _, attribute = value.partition(":")
        try:
            approach = getattr(importlib.import_module(module.strip()), attribute.strip() or "APPROACH")
        except (ImportError, AttributeError) as exc:
            raise RmspecError(
                f"{where}: cannot load an approach from {value!r}: {exc}",
                "name importable modules that define APPROACH (an rmspec.approaches.base.Approach)"
                + (", comma-separated" if where == PLUGINS_ENV else "; or uninstall the package that declares it"),
            ) from None
        _add(approach, module.strip(), where)  # a shipped approach's name: exit 2 naming both modules


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
    """Add an approach at run time (a test, a notebook); shipped approaches are the MODULES lines,
    installed ones the entry points. The spec's `approach:` union then accepts its section. A name
    another module already gives is refused (rmspec.plugin_clash.RegistryClash)."""
    _add(approach, type(approach).__module__)
    use_sections([a.section for a in _registry.values()])


def unregister(name: str) -> None:
    _homes.pop(name, None)
    if _registry.pop(name, None) is not None:
        use_sections([a.section for a in _registry.values()])


_load_plugins()
use_sections([a.section for a in _registry.values()])  # the spec's `approach:` union: these sections
