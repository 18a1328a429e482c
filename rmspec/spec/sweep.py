"""`sweep:` a hyperparameter search over the rest of the spec, run by `rmspec sweep` (Optuna ask/tell).

The space is keyed by dotted spec paths (`training.learning_rate`); each trial is an ordinary run of the
spec with the trial's values applied. Light: pydantic only (Optuna is imported by rmspec.sweep alone).
The checks that need the rest of the spec (paths exist, a sample validates, the objective is produced)
live in rmspec.spec.sweep_rules.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section
from rmspec.spec.hardware import SlurmSpec

# Optuna stores categorical choices as these types only (its CategoricalDistribution).
Scalar = str | int | float | bool | None


class FloatParam(Section):
    kind: Literal["float"] = Field(description="A real number between low and high.")
    low: float = Field(description="Smallest value tried.")
    high: float = Field(description="Largest value tried.")
    log: bool = Field(False, description="Sample on a log scale (learning rates); low must be > 0.")
    step: PositiveFloat | None = Field(
        None, description="Only values low + k*step (needed by the grid sampler); not with log."
    )

    @model_validator(mode="after")
    def _bounds(self) -> FloatParam:
        _check_bounds(self.low, self.high, self.log, self.step)
        return self


class IntParam(Section):
    kind: Literal["int"] = Field(description="An integer between low and high (both included).")
    low: int = Field(description="Smallest value tried.")
    high: int = Field(description="Largest value tried.")
    log: bool = Field(False, description="Sample on a log scale; low must be > 0.")
    step: PositiveInt = Field(1, description="Only values low + k*step; must be 1 with log.")

    @model_validator(mode="after")
    def _bounds(self) -> IntParam:
        _check_bounds(self.low, self.high, self.log, self.step if self.step != 1 else None)
        return self


class CategoricalParam(Section):
    kind: Literal["categorical"] = Field(description="One of a list of values.")
    choices: list[Scalar] = Field(min_length=1, description="The values tried (strings, numbers, booleans, null).")


class GroupParam(Section):
    kind: Literal["group"] = Field(
        description="Several keys that change together: each choice is a map of dotted spec paths to values. "
        "The space's key names the group (it is not a spec path)."
    )
    choices: list[dict[str, Scalar | list | dict]] = Field(
        min_length=1, description="The combinations tried, e.g. [{training.global_batch_size: 8, ...}, ...]."
    )


Param = Annotated[FloatParam | IntParam | CategoricalParam | GroupParam, Field(discriminator="kind")]


class Objective(Section):
    metric: str = Field(
        description="Dotted path into the trial's results.json, e.g. validation.overall or "
        "benchmarks.NAME.overall (a benchmark's name is its name:, else its file's stem for pairs, else its kind; "
        "kind-file for a second one of a kind)."
    )
    direction: Literal["maximize", "minimize"] = Field("maximize", description="Whether higher or lower is better.")


class Sampler(Section):
    kind: Literal["tpe", "random", "grid"] = Field(
        "tpe", description="Optuna's TPESampler, RandomSampler or GridSampler (every combination, in random order)."
    )
    seed: int | None = Field(0, description="Seed of the sampler (null: a different sequence each sweep).")


class Pruner(Section):
    kind: Literal["none", "median", "hyperband"] = Field(
        "none",
        description="Stop unpromising trials from their validation metric logged during training "
        "(needs training.eval_steps): Optuna's MedianPruner or HyperbandPruner.",
    )
    metric: str | None = Field(
        None,
        description="metrics.jsonl key reported at each evaluation (default: the approach's first validation "
        "metric, e.g. eval/rm/accuracy); losses are minimised, the rest maximised.",
    )
    startup_trials: NonNegativeInt = Field(
        2, description="median: trials that finish before any is pruned (n_startup_trials)."
    )
    warmup_steps: NonNegativeInt = Field(0, description="median: steps of a trial before it can be pruned.")
    min_resource: PositiveInt = Field(1, description="hyperband: steps every trial gets before it can be pruned.")
    reduction_factor: int = Field(3, ge=2, description="hyperband: 1/reduction_factor of trials go on at each rung.")


class SweepSpec(Section):
    space: dict[str, Param] = Field(
        min_length=1, description="What to search: dotted spec path (or a group's name) -> its range or choices."
    )
    objective: Objective = Field(description="The results.json metric the search optimises.")
    sampler: Sampler = Field(default_factory=Sampler, description="How the next trial's values are chosen.")
    pruner: Pruner = Field(default_factory=Pruner, description="Whether and how unpromising trials stop early.")
    trials: PositiveInt = Field(20, description="Trials in the whole sweep (a resumed sweep continues to it).")
    timeout: PositiveFloat | None = Field(
        None, description="Seconds after which no new trial starts (the running one finishes)."
    )
    seeds: list[int] | None = Field(
        None,
        min_length=1,
        description="training.seed of each run of a trial; the objective is their mean, with its standard "
        "error. Default: one run with the spec's training.seed.",
    )
    first_trials: list[dict[str, Scalar]] = Field(
        default_factory=list,
        description="Trials run first, in order (e.g. the spec's own values): space key -> value; "
        "a group takes the index of its choice.",
    )
    dir: str = Field("sweeps/{name}", description="Sweep directory (rmspec sweep -o overrides); {name} is the name.")
    parallel: PositiveInt = Field(
        1,
        description="Trials at once in one `rmspec sweep` process: on this host each gets its own devices from its "
        "plan (CUDA_VISIBLE_DEVICES; on a CPU host its own cores), or with `slurm` this many jobs at a time.",
    )
    storage: str = Field(
        "sqlite",
        description="Where the Optuna study lives: sqlite (DIR/study.db, one sweep process), journal "
        "(DIR/study.journal: Optuna's JournalStorage, for several `rmspec sweep --join` workers over a shared "
        "file system), or an RDB URL (postgresql://..., mysql://...) the workers all reach.",
    )
    slurm: SlurmSpec | None = Field(
        None,
        description="Run each trial as its own one-node SLURM job (sbatch, at most `parallel` at a time) with "
        "these #SBATCH settings (partition, account, time, qos, constraint, gpus_per_node, extra); "
        "the sweep directory must be on a file system the nodes share. {} submits with sbatch's defaults.",
    )

    @field_validator("storage")
    @classmethod
    def _known_storage(cls, storage: str) -> str:
        problem = storage_problem(storage)
        if problem:
            raise ValueError(problem)
        return storage


STORAGE_KINDS = ("sqlite", "journal")
RDB_SCHEMES = ("postgresql", "mysql", "sqlite", "oracle", "mssql")


def storage_problem(storage: str) -> str | None:
    """Why `storage` names no storage rmspec sweep can open (None when it does). Light: no Optuna."""
    if storage in STORAGE_KINDS:
        return None
    scheme = storage.split("://", 1)[0].split("+", 1)[0] if "://" in storage else ""
    if scheme in RDB_SCHEMES:
        return None
    return f"{storage!r} is not a storage: give sqlite, journal or an RDB URL (postgresql://user@host/db)"


def _check_bounds(low: float, high: float, log: bool, step: float | None) -> None:
    if low > high:
        raise ValueError(f"low {low} is above high {high}")
    if log and low <= 0:
        raise ValueError("a log scale needs low > 0")
    if log and step is not None:
        raise ValueError("give log or step, not both (Optuna samples a log scale continuously)")
