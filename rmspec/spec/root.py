"""The whole spec: one section per concern.

`approach:` is the one section the spec does not define: each approach's module under
rmspec/approaches/ holds its section class (a subclass of rmspec.spec.approach.ApproachSection), and
the approach registry hands them to `use_sections` when it loads (rmspec/__init__.py loads it first,
so every command, test and training process sees the whole union). The spec asks no approach by name.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from rmspec.spec.approach import SECTIONS, ApproachSection, approach_union
from rmspec.spec.base import Section
from rmspec.spec.data import DataSpec
from rmspec.spec.evaluation import EvalSpec
from rmspec.spec.hardware import HardwareSpec
from rmspec.spec.model import ModelSpec
from rmspec.spec.output import OutputSpec, TrackingSpec
from rmspec.spec.sweep import SweepSpec
from rmspec.spec.training import TrainingSpec

SPEC_VERSION = 1
# The approach kinds `approach:` accepts, in the registry's order (use_sections keeps it current).
APPROACH_KINDS: list[str] = []


def approach_description(kinds: list[str]) -> str:
    """The `approach:` field's description, naming every kind so that it never omits one."""
    return f"How the reward is learned (kind: {', '.join(kinds)})."


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
    # The type checker reads the base section; at run time `use_sections` puts the registry's union here.
    approach: ApproachSection = Field(description=approach_description(APPROACH_KINDS))
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
    """Make `approach:` accept exactly these sections, told apart by `kind` (the approach registry calls
    this when it loads and when an approach is registered at run time): the union is rebuilt, its
    description names every kind, and Spec is re-validated against it."""
    SECTIONS[:] = sections
    APPROACH_KINDS[:] = [get_args(section.model_fields["kind"].annotation)[0] for section in sections]
    union = approach_union(sections)
    field = Spec.model_fields["approach"]
    field.annotation = get_args(union)[0]
    field.metadata = list(get_args(union)[1:])
    field.description = approach_description(APPROACH_KINDS)
    Spec.model_rebuild(force=True)
