"""The spec's `sweep:` in Optuna's terms: the value of each key for a trial, the sampler and the pruner.

A group is one categorical parameter whose value is the index of its choice (Optuna's categorical choices
must be plain values); `values_of` expands it into the spec paths it sets.
"""

from __future__ import annotations

import zlib
from typing import Any

import optuna

from rmspec.spec.sweep import CategoricalParam, FloatParam, GroupParam, IntParam, SweepSpec
from rmspec.spec.sweep_rules import expand, top


def suggest(trial: optuna.Trial, sweep: SweepSpec) -> dict[str, Any]:
    """The trial's value of every space key (a group: the index of its choice)."""
    params: dict[str, Any] = {}
    for key, param in sweep.space.items():
        if isinstance(param, FloatParam):
            params[key] = trial.suggest_float(key, param.low, top(param), log=param.log, step=param.step)
        elif isinstance(param, IntParam):
            params[key] = trial.suggest_int(key, param.low, int(top(param)), log=param.log, step=param.step)
        elif isinstance(param, CategoricalParam):
            params[key] = trial.suggest_categorical(key, param.choices)
        else:
            params[key] = trial.suggest_categorical(key, list(range(len(param.choices))))
    return params


def values_of(sweep: SweepSpec, params: dict[str, Any]) -> dict[str, Any]:
    """{spec path: value} the trial sets (groups expanded)."""
    return expand(sweep, params)


def grid_points(sweep: SweepSpec) -> dict[str, list[Any]]:
    """Every value of every key, for the grid sampler (validate refuses a float range without a step)."""
    grid: dict[str, list[Any]] = {}
    for key, param in sweep.space.items():
        if isinstance(param, (FloatParam, IntParam)):
            step = param.step or 1
            count = int(round((top(param) - param.low) / step)) + 1
            values = [param.low + i * step for i in range(count)]
            grid[key] = [int(v) for v in values] if isinstance(param, IntParam) else [round(v, 12) for v in values]
        elif isinstance(param, GroupParam):
            grid[key] = list(range(len(param.choices)))
        else:
            grid[key] = list(param.choices)
    return grid


def sampler_of(sweep: SweepSpec, salt: str | None = None) -> optuna.samplers.BaseSampler:
    """The sampler, seeded by sampler.seed. A resumed sweep or a --join worker gives a `salt` (its host and
    pid): the same seed in every process would draw the same values again (the resumed sampler restarts its
    sequence, and two workers would propose identical trials), so the seed is mixed with the salt there."""
    seed = sweep.sampler.seed
    if seed is not None and salt is not None:
        seed = (seed + zlib.crc32(salt.encode())) % 2**32
    if sweep.sampler.kind == "grid":
        return optuna.samplers.GridSampler(grid_points(sweep), seed=seed)
    if sweep.sampler.kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def pruner_of(sweep: SweepSpec) -> optuna.pruners.BasePruner:
    pruner = sweep.pruner
    if pruner.kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=pruner.startup_trials, n_warmup_steps=pruner.warmup_steps)
    if pruner.kind == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=pruner.min_resource, reduction_factor=pruner.reduction_factor
        )
    return optuna.pruners.NopPruner()


def direction_of(metric: str) -> str:
    """Optuna's direction for a metrics.jsonl name: losses and errors down, the rest up."""
    from rmspec.spec.training import lower_is_better

    return "minimize" if lower_is_better(metric) else "maximize"
