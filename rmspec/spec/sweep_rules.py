"""The checks of `sweep:` that need the rest of the spec: every path of the space is a spec field, a sample
of the space validates, the objective is a metric this spec's run writes, the pruner has a metric to read.

Each yields (path, message, hint) like rmspec.spec.rules; `checker` is rules.check, passed in so that this
module does not import the module that calls it.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Iterator
from difflib import get_close_matches
from typing import Any

from pydantic import BaseModel, ValidationError

from rmspec.errors import SpecError
from rmspec.spec.base import Problem
from rmspec.spec.overrides import apply_set
from rmspec.spec.sweep import FloatParam, GroupParam, IntParam, SweepSpec
from rmspec.spec.training_rules import valid_best_metrics

Checker = Callable[[Any], list[Problem]]
# Set by rmspec sweep itself for every trial: the space cannot move them.
OWNED_BY_SWEEP = ("version", "name", "extends", "sweep", "output.dir")
# What an entry of results.json holds (rmspec.rundir.results), below validation or benchmarks.NAME.
# validation.metrics.NAME: the approach's own validation metrics (rmspec.approaches declares the names; the
# sweep checks them when it starts, since this layer cannot read the registry).
ENTRY_KEYS = ("overall", "sections", "subsets", "counts", "num_examples", "diagnostics", "details", "metrics")


def sweep_problems(spec: Any, checker: Checker) -> Iterator[Problem]:
    sweep: SweepSpec | None = spec.sweep
    if sweep is None:
        return
    bad_paths = False
    for key, param in sweep.space.items():
        for path in group_paths(param) if isinstance(param, GroupParam) else [key]:
            problem = path_problem(type(spec), path)
            if problem:
                bad_paths = True
                yield ("sweep", "space", key), problem, "write a dotted path of the spec, e.g. training.learning_rate"
    yield from _objective(spec, sweep)
    yield from _pruner(spec, sweep)
    yield from _grid(sweep)
    yield from _first_trials(sweep)
    yield from _slurm(spec, sweep)
    if sweep.seeds and "training.seed" in sweep.space:
        yield ("sweep", "seeds"), "seeds sets training.seed, which the space also sweeps", "drop one of the two"
    if not bad_paths:
        yield from _sample_validates(spec, sweep, checker)


def group_paths(param: GroupParam) -> list[str]:
    return sorted({path for choice in param.choices for path in choice})


def path_problem(model: type[BaseModel], path: str) -> str | None:
    """Why `path` names no field of the spec model, or None when it does."""
    if any(path == p or path.startswith(p + ".") for p in OWNED_BY_SWEEP):
        return f"{path} is set by rmspec sweep for each trial; it cannot be swept"
    parts = path.split(".")
    annotation: Any = model
    for i, part in enumerate(parts):
        found, reason = _step(annotation, part)
        if reason:
            where = ".".join(parts[:i]) or "the spec"
            return f"{path}: {where} {reason}"
        annotation = found
    return None


def _step(annotation: Any, part: str) -> tuple[Any, str | None]:
    """The annotation below `part`, or why there is none (unions: any member that has it)."""
    members = _members(annotation)
    reasons = []
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            if part in member.model_fields:
                return member.model_fields[part].annotation, None
            close = get_close_matches(part, list(member.model_fields), n=1)
            reasons.append(f"has no field {part!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        elif typing.get_origin(member) is list and part.isdigit():
            return typing.get_args(member)[0], None
        elif typing.get_origin(member) is dict:
            return typing.get_args(member)[1], None
    return None, reasons[0] if reasons else f"is a value, with no key {part!r} below it"


def _members(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def sample_points(sweep: SweepSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, {path: value}) for the ends of every range and every choice, each applied alone, then
    the first trials: a sample that finds a bound or choice under which the spec stops validating."""
    for key, param in sweep.space.items():
        if isinstance(param, GroupParam):
            for i, option in enumerate(param.choices):
                yield f"{key} choice {i}", dict(option)
        elif isinstance(param, (FloatParam, IntParam)):
            for bound in dict.fromkeys((param.low, top(param))):
                yield f"{key}={bound}", {key: bound}
        else:
            for choice in param.choices:
                yield f"{key}={choice}", {key: choice}
    for i, values in enumerate(sweep.first_trials):
        yield f"first_trials[{i}]", expand(sweep, values)


def top(param: FloatParam | IntParam) -> float | int:
    """The largest value the range can give (low + k*step when a step is set)."""
    if param.step in (None, 1) or param.log:
        return param.high
    k = math.floor((param.high - param.low) / param.step + 1e-9)
    value = param.low + k * param.step
    return value if isinstance(param, IntParam) else round(value, 12)


def expand(sweep: SweepSpec, values: dict[str, Any]) -> dict[str, Any]:
    """Space values (a group by the index of its choice) as {spec path: value}."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        param = sweep.space.get(key)
        if isinstance(param, GroupParam) and isinstance(value, int) and 0 <= value < len(param.choices):
            out.update(param.choices[value])
        else:
            out[key] = value
    return out


def apply_values(document: dict, values: dict[str, Any]) -> dict:
    """A copy of `document` (no sweep section) with each {dotted path: value} set."""
    import copy

    doc = copy.deepcopy({k: v for k, v in document.items() if k != "sweep"})
    for path, value in values.items():
        parts = tuple(int(p) if p.isdigit() else p for p in path.split("."))
        apply_set(doc, parts, copy.deepcopy(value), path)
    return doc


def _sample_validates(spec: Any, sweep: SweepSpec, checker: Checker) -> Iterator[Problem]:
    base = spec.model_dump(mode="python", exclude_unset=True, by_alias=True)
    for label, values in sample_points(sweep):
        try:
            trial = type(spec).model_validate(apply_values(base, values))
        except SpecError as exc:  # a path that cannot be set (an index past the end of a list)
            yield _sample_problem(label, exc.issues[0].message, len(exc.issues))
            continue
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the spec"
            yield _sample_problem(label, f"{where}: {first['msg']}", exc.error_count())
            continue
        problems = checker(trial)
        if problems:
            path, message, _ = problems[0]
            yield _sample_problem(label, f"{'.'.join(map(str, path))}: {message}", len(problems))


def _sample_problem(label: str, message: str, count: int) -> Problem:
    more = f" (and {count - 1} more)" if count > 1 else ""
    return (
        ("sweep", "space", label.split("=")[0].split(" ")[0].split("[")[0]),
        f"with {label} the spec does not validate: {message}{more}",
        "narrow the range or drop the choice, or check it alone: rmspec validate SPEC --set PATH=VALUE",
    )


def _objective(spec: Any, sweep: SweepSpec) -> Iterator[Problem]:
    parts = sweep.objective.metric.split(".")
    path = ("sweep", "objective", "metric")
    names = benchmark_names(spec)
    if parts[0] == "validation":
        if not spec.eval.validation:
            yield (
                path,
                "the objective reads validation, which eval.validation: false does not write",
                ("write eval.validation: true, or name a benchmark"),
            )
        entry_key = parts[1] if len(parts) > 1 else None
    elif parts[0] == "benchmarks":
        name = parts[1] if len(parts) > 1 else ""
        if name not in names:
            yield (
                path,
                f"no benchmark {name!r} in eval.benchmarks (results.json will hold: {', '.join(names) or 'none'})",
                (f"use one of: {', '.join(f'benchmarks.{n}.overall' for n in names) or 'validation.overall'}"),
            )
            return
        entry_key = parts[2] if len(parts) > 2 else None
    else:
        yield (
            path,
            f"{sweep.objective.metric!r} is not a metric of results.json",
            ("write validation.overall or benchmarks.NAME.overall"),
        )
        return
    if entry_key not in ENTRY_KEYS:
        yield (
            path,
            f"{sweep.objective.metric!r}: an entry of results.json holds {', '.join(ENTRY_KEYS)}",
            (f"e.g. {'.'.join(parts[: 2 if parts[0] == 'benchmarks' else 1])}.overall"),
        )


def benchmark_names(spec: Any) -> list[str]:
    """The names results.json gives the spec's benchmarks (rmspec.spec.benchmarks.result_name)."""
    from rmspec.spec.benchmarks import result_name

    taken: set[str] = set()
    return [result_name(b.kind, b.path, taken, b.name) for b in spec.eval.benchmarks]


def pruner_metric(spec: Any) -> str:
    return spec.sweep.pruner.metric or valid_best_metrics(spec.approach)[0]


def _pruner(spec: Any, sweep: SweepSpec) -> Iterator[Problem]:
    if sweep.pruner.kind == "none":
        return
    if spec.training.eval_steps is None:
        yield (
            ("sweep", "pruner", "kind"),
            "pruning reads the validation metric logged during training; none is",
            ("write training.eval_steps (e.g. 20) or pruner: {kind: none}"),
        )
    valid = valid_best_metrics(spec.approach)
    if sweep.pruner.metric is not None and sweep.pruner.metric not in valid:
        yield (
            ("sweep", "pruner", "metric"),
            f"{sweep.pruner.metric!r} is not logged by {spec.approach.kind}'s validation",
            (f"use one of: {', '.join(valid)}"),
        )


def _slurm(spec: Any, sweep: SweepSpec) -> Iterator[Problem]:
    if sweep.slurm is None:
        return
    if spec.hardware.nodes > 1:
        yield (
            ("sweep", "slurm"),
            "a trial on several nodes as a job of the sweep is not built: sweep.slurm submits one-node trials",
            "plan each trial on one node (hardware.nodes: 1), or delete sweep.slurm and run the trials here",
        )
    if sweep.slurm.gpu_count() is not None and spec.hardware.device == "cpu":
        yield (
            ("sweep", "slurm", "gpus_per_node"),
            "sweep.slurm.gpus_per_node asks for GPUs, but hardware.device is cpu",
            "delete sweep.slurm.gpus_per_node",
        )


def _grid(sweep: SweepSpec) -> Iterator[Problem]:
    if sweep.sampler.kind != "grid":
        return
    for key, param in sweep.space.items():
        if isinstance(param, FloatParam) and param.step is None:
            yield ("sweep", "space", key), "the grid sampler needs a finite set of values", "give the range a step"


def _first_trials(sweep: SweepSpec) -> Iterator[Problem]:
    for i, values in enumerate(sweep.first_trials):
        for key, value in values.items():
            param = sweep.space.get(key)
            where = ("sweep", "first_trials", i, key)
            if param is None:
                yield where, f"{key!r} is not a key of sweep.space", f"use one of: {', '.join(sweep.space)}"
            elif isinstance(param, GroupParam) and not (isinstance(value, int) and 0 <= value < len(param.choices)):
                yield where, f"a group takes the index of its choice (0 to {len(param.choices) - 1})", None
            elif isinstance(param, (FloatParam, IntParam)) and not (
                isinstance(value, (int, float)) and param.low <= value <= param.high
            ):
                yield where, f"{value!r} is outside [{param.low}, {param.high}]", None
            elif not isinstance(param, (GroupParam, FloatParam, IntParam)) and value not in param.choices:
                yield where, f"{value!r} is not one of the choices {param.choices}", None
