"""The benchmark registry: a kind's name -> its object (rmspec.evaluate.kinds.base.BenchmarkKind).

The names come from the catalogue (rmspec.spec.benchmarks.CATALOGUE), which names each kind's
module; the module is imported when the kind is first used. Loading, per-example rows, the
official figures, the diagnostics' pairs and the report all go through `get`.
"""

from __future__ import annotations

import importlib

from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.spec.benchmarks import CATALOGUE, BenchmarkInfo

# results.json entries that are not benchmarks but have a benchmark's rows: scored as that kind.
ENTRY_KINDS = {"validation": "pairs", "process_validation": "processbench"}

_loaded: dict[str, BenchmarkKind] = {}


def get(kind: str) -> BenchmarkKind:
    """The kind's object (also for the entry kinds `validation` and `process_validation`)."""
    name = ENTRY_KINDS.get(kind, kind)
    if name not in _loaded:
        if name not in CATALOGUE:
            raise ValueError(f"unknown benchmark kind {kind!r}")
        _loaded[name] = importlib.import_module(CATALOGUE[name].module).KIND
    return _loaded[name]


def register(info: BenchmarkInfo, kind: BenchmarkKind) -> None:
    """Add a kind at run time: the one line a benchmark kind from outside rmspec (a plugin, a test's
    module) needs; shipped kinds are the catalogue's lines. The spec's `eval.benchmarks[].kind` and
    `rmspec eval --benchmark` accept it from then on. A name the catalogue already gives another module
    is refused (rmspec.plugin_clash.RegistryClash, naming both modules)."""
    from rmspec.plugin_clash import refuse_clash

    known = CATALOGUE.get(info.name)
    refuse_clash("benchmark kind", info.name, known.module if known else None, info.module)
    CATALOGUE[info.name] = info
    _loaded[info.name] = kind
    _spec_follows()


def unregister(name: str) -> None:
    CATALOGUE.pop(name, None)
    _loaded.pop(name, None)
    _spec_follows()


def _spec_follows() -> None:
    """The spec documents that hold `eval:` take the catalogue's kinds as they are now."""
    from rmspec.spec.composite_spec import CompositeSpec
    from rmspec.spec.evaluation import use_benchmark_kinds
    from rmspec.spec.root import Spec

    use_benchmark_kinds(Spec, CompositeSpec)
