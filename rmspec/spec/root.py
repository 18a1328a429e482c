"""The whole spec: one section per concern."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from rmspec.spec.approach import Approach, ApproachSection, approach_union
from rmspec.spec.base import Section
from rmspec.spec.data import DataSpec
from rmspec.spec.evaluation import EvalSpec
from rmspec.spec.hardware import HardwareSpec
from rmspec.spec.model import ModelSpec
from rmspec.spec.output import OutputSpec, TrackingSpec
from rmspec.spec.sweep import SweepSpec
from rmspec.spec.training import TrainingSpec

SPEC_VERSION = 1
# The approach kinds, read from the union itself so the description never omits one.
APPROACH_KINDS = [get_args(m.model_fields["kind"].annotation)[0] for m in get_args(get_args(Approach)[0])]


class Spec(Section):
    """An rmspec job: data, approach, model, training, hardware, evaluation and output."""

    version: Literal[1] = Field(description="Version of the spec format (currently 1).")
    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Run name: letters, digits, '.', '_' and '-'; names the run directory.",
    )
    extends: str | None = Field(
        None, description="Another spec file (relative to this one) whose values this file overrides."
    )
    model: ModelSpec = Field(description="The checkpoint to train.")
    data: DataSpec = Field(description="Training data: source, mapping, filters, augmentation, split.")
    approach: Approach = Field(description=f"How the reward is learned (kind: {', '.join(APPROACH_KINDS)}).")
    training: TrainingSpec = Field(default_factory=TrainingSpec, description="Optimisation settings.")
    hardware: HardwareSpec = Field(default_factory=HardwareSpec, description="What the job runs on; the plan sizes it.")
    eval: EvalSpec = Field(default_factory=EvalSpec, description="Validation metrics and benchmarks.")
    output: OutputSpec = Field(default_factory=OutputSpec, description="Run directory, hub upload and report formats.")
    tracking: TrackingSpec = Field(
        default_factory=TrackingSpec, description="Experiment trackers besides metrics.jsonl."
    )
    sweep: SweepSpec | None = Field(
        None, description="A hyperparameter search over this spec, run by `rmspec sweep` (refused by `rmspec run`)."
    )


def use_sections(sections: list[type[ApproachSection]]) -> None:
    """Make `approach:` accept exactly these sections (rmspec.approaches.register calls this for an
    approach added at run time): the union is rebuilt and Spec re-validated against it."""
    import rmspec.spec.approach as approach_module

    union = approach_union(sections)
    approach_module.SECTIONS[:] = sections
    approach_module.Approach = union
    field = Spec.model_fields["approach"]
    field.annotation = get_args(union)[0]
    field.metadata = list(get_args(union)[1:])
    Spec.model_rebuild(force=True)
