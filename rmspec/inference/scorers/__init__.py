"""The scorer kinds: what a saved model (or a composite) is, and everything that depends on it.

One module per kind (reward, pointwise, judge, process, composite), each holding a `KIND` object
(rmspec.inference.scorers.base.ScorerType): how that kind is recognised and loaded, how a row or a
request becomes its input, how a batch is scored, and what its outputs are (the columns of
`rmspec score`, the protocols `rmspec serve` answers, how evaluation reads its benchmark rows).
`rmspec score`, `rmspec serve`, evaluation and active selection ask `of(engine)` and never
compare with a scorer kind themselves.

This module is the registry and stays light (no torch, no kind module imported until asked):
`names()` and `description(name)` read only the table below. A new scorer kind is one module
with a `KIND` and one line in _SHIPPED; a kind from outside rmspec (a plugin, a test) is registered
with `register(KIND)`, or named in RMSPEC_SCORERS="package.module,..." (each module's `KIND`),
or declared in the `rmspec.scorers` entry-point group (an entry point naming the `KIND` object).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmspec.inference.scorers.base import ScorerType

# (name, module holding its KIND, what it is). The order is the order `load` asks each kind
# whether it claims a model: the most specific first, the reward kind (any score head) last.
_SHIPPED = (
    ("composite", "rmspec.composite.scorer_kind", "rules, judges and models combined by a spec: trains nothing"),
    ("judge", "rmspec.inference.scorers.judge", "a generative judge: generates a verdict, has no score head"),
    ("process", "rmspec.inference.scorers.process", "a process reward model: P(correct) per step"),
    ("vision_reward", "rmspec.inference.scorers.vision_reward", "a score head on a vision-language model"),
    ("pointwise", "rmspec.inference.scorers.pointwise", "a score head with one output per attribute"),
    ("reward", "rmspec.inference.scorers.reward", "a score head: one scalar reward per text"),
)
KINDS: dict[str, tuple[str, str]] = {name: (module, description) for name, module, description in _SHIPPED}
PLUGINS_ENV = "RMSPEC_SCORERS"
ENTRY_POINTS = "rmspec.scorers"

_loaded: dict[str, ScorerType] = {}
_outside: dict[str, ScorerType] = {}  # registered from outside rmspec: asked before the shipped kinds
_outside_homes: dict[str, str] = {}  # their modules (a clash names both)
_plugins_read = False


def names() -> tuple[str, ...]:
    """Every kind's name (shipped and registered), light."""
    _read_plugins()
    return (*_outside, *KINDS)


def description(name: str) -> str:
    _read_plugins()
    return _outside[name].description if name in _outside else KINDS[name][1]


def get(name: str) -> ScorerType:
    """The kind's object; its module is imported on first use."""
    _read_plugins()
    if name in _outside:
        return _outside[name]
    if name not in _loaded:
        if name not in KINDS:
            raise ValueError(f"unknown scorer kind {name!r} (known: {', '.join(names())})")
        _loaded[name] = importlib.import_module(KINDS[name][0]).KIND
    return _loaded[name]


def of(engine: Any) -> ScorerType:
    """The kind of a loaded scorer (its `kind` attribute names it)."""
    return get(str(engine.kind))


def register(kind: ScorerType, module: str | None = None, where: str = "") -> None:
    """Add a kind from outside rmspec; it is asked before the shipped ones whether it claims a model.
    A name a shipped kind or another module already has is refused (rmspec.plugin_clash.RegistryClash,
    exit 2 naming both modules): `module` (default: the kind's class's) declares it, at `where`."""
    from rmspec.plugin_clash import refuse_clash

    name = str(kind.kind)
    module = module or type(kind).__module__
    registered = KINDS[name][0] if name in KINDS else _outside_homes.get(name)
    refuse_clash("scorer kind", name, registered, module, where)
    if name in KINDS:
        return  # the shipped kind's own module: it is registered already
    _outside[name] = kind
    _outside_homes[name] = module


def unregister(name: str) -> None:
    _outside.pop(name, None)
    _outside_homes.pop(name, None)


def load(
    model_or_run: str | Path,
    *,
    dtype: str = "float32",
    device: str | None = None,
    batch_size: int | None = None,
    step_separator: str | None = None,
) -> Any:
    """The scorer a run directory (its spec decides layout, max_length, approach) or a model folder
    holds, loaded by the first kind that claims it. `step_separator` (the CLI's --step-separator):
    only for a kind that reads steps."""
    from rmspec.inference.scorers.base import Found

    found = Found(model_or_run)
    kind = next(get(name) for name in names() if get(name).claims(found))
    if step_separator is not None and not kind.reads_steps:
        from rmspec.errors import RmspecError

        raise RmspecError(
            f"--step-separator is for process reward models; {model_or_run} is not one",
            "leave out --step-separator (it has no effect on a reward model or a judge)",
        )
    return kind.load(found, dtype=dtype, device=device, batch_size=batch_size, step_separator=step_separator)


def _read_plugins() -> None:
    """Kinds named in RMSPEC_SCORERS and the `rmspec.scorers` entry points, read once."""
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        register(importlib.import_module(module).KIND, module, PLUGINS_ENV)
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS):
        register(point.load(), point.module, f"entry point {point.name!r} of group {ENTRY_POINTS}")
