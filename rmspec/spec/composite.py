"""`approach: {kind: composite}`: a reward built without training, from verifiable rules, LLM judges
and trained models, combined by weights, gates and routes.

Here: the union of component kinds, gates, routes and the checks across components. Each kind's settings
live in rmspec.spec.composite_rules (verifiable rules) or rmspec.spec.composite_models (a model, a judge),
on the common ComponentBase of rmspec.spec.composite_component (light: the spec side validates them without
importing anything heavy); what each kind computes lives in one module per kind under
`rmspec.composite.components`, looked up by the same `kind`.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from rmspec.spec.base import Section
from rmspec.spec.composite_component import FAILURE_REASONS, ComponentBase, OnFailure
from rmspec.spec.composite_models import JudgeComponent, ModelComponent
from rmspec.spec.composite_rules import JsonSchemaRule, LengthRule, MathAnswer, RegexRule, RepetitionRule

# Keys the composite writes beside its components' values: `rmspec score` (reward, gate,
# `<name>_error`), serve's extra_logs (gated, `<name>_<reason>`), verl's compute_score (score,
# `<name>_failed`). A component may not be named like one of them, or like another's derived key.
RESERVED_NAMES = ("reward", "score", "gate", "gated")
DERIVED_SUFFIXES = ("error", "failed", *FAILURE_REASONS)

ComponentSettings = Annotated[
    ModelComponent | MathAnswer | RegexRule | JsonSchemaRule | LengthRule | RepetitionRule | JudgeComponent,
    Field(discriminator="kind"),
]
# The settings classes `components:` accepts, in the schema's order: the shipped ones above, then any
# registered at run time (rmspec.composite.components.register rebuilds the union through
# rmspec.spec.composite_spec.use_components).
COMPONENT_SETTINGS: list[type[ComponentBase]] = list(get_args(get_args(ComponentSettings)[0]))


def kind_of(settings: type[ComponentBase]) -> str:
    """The `kind:` value a component settings class is selected by."""
    return get_args(settings.model_fields["kind"].annotation)[0]


class Gate(Section):
    component: str = Field(description="The component that must pass.")
    threshold: float = Field(1.0, description="It passes when its value is >= threshold (rules give 1 or 0).")
    floor: float = Field(description="The reward of a row that fails the gate, whatever the other components say.")


class CompositeColumns(Section):
    prompt: str = Field("prompt", description="Column with the prompt (text or chat messages).")
    response: str = Field("response", description="Column with the response scored.")
    label: str = Field(
        "label",
        description="Column with the reference answer for rules (OpenRLHF sends it as `labels`, verl as `ground_truth`).",
    )


class Composite(Section):
    """A reward from components: trains nothing; `rmspec run` fits normalisation and evaluates it."""

    kind: Literal["composite"]
    components: list[ComponentSettings] = Field(min_length=1, description="The parts of the reward.")
    combine: Literal["weighted_sum", "weighted_mean"] = Field(
        "weighted_sum",
        description="sum(w_i x v_i), or that divided by the sum of the absolute weights used on the row.",
    )
    gates: list[Gate] = Field(
        default_factory=list, description="Components that must pass, else the reward is the floor."
    )
    route_by: str | None = Field(
        None, description="A column (e.g. verl's data_source) whose value picks the components of each row (routes)."
    )
    routes: dict[str, list[str]] = Field(
        default_factory=dict, description="route_by value -> the component names used for such rows."
    )
    default_route: list[str] | None = Field(
        None, description="The components for a row whose route_by value is not in routes (needed with route_by)."
    )
    on_failure: OnFailure = Field(
        "error",
        description="A failed component: error (the row is rejected with the reason), skip (left out, the "
        "remaining weights renormalised to their original total of absolute weights) or {value: X} (it takes X).",
    )
    columns: CompositeColumns = Field(default_factory=CompositeColumns, description="Where rows hold each role.")
    end_tokens: list[str] = Field(
        default_factory=lambda: ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<eos>", "[SEP]"],
        description="Text removed from the end of a response that OpenRLHF sends inside its query (the decoded EOS).",
    )

    @model_validator(mode="after")
    def _names(self) -> Composite:
        names = [c.name for c in self.components]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"component names must be unique; repeated: {', '.join(duplicates)}")
        taken = [n for n in names if n in RESERVED_NAMES]
        if taken:
            raise ValueError(
                f"component name {taken[0]!r} is a key of the composite's own output "
                f"({', '.join(RESERVED_NAMES)}): rename the component"
            )
        for name in names:  # `<name>_error` (rmspec score), `<name>_<reason>` (serve), `<name>_failed` (verl)
            clash = next((f"{name}_{s}" for s in DERIVED_SUFFIXES if f"{name}_{s}" in names), None)
            if clash is not None:
                raise ValueError(
                    f"component name {clash!r} is also the key of component {name!r}'s failures in the "
                    f"composite's output ({name}_error, {name}_failed, {name}_<reason>): rename one of them"
                )
        known = set(names)
        for where, used in [
            ("gates", [g.component for g in self.gates]),
            *((f"routes.{key}", value) for key, value in self.routes.items()),
            ("default_route", self.default_route or []),
        ]:
            unknown = [n for n in used if n not in known]
            if unknown:
                raise ValueError(
                    f"{where} names no component {', '.join(map(repr, unknown))}; known: {', '.join(names)}"
                )
        if self.route_by is None and (self.routes or self.default_route is not None):
            raise ValueError("routes/default_route need route_by (the column that picks the route)")
        if self.route_by is not None and self.default_route is None:
            raise ValueError("route_by needs default_route: the components for rows whose value has no route")
        if self.combine == "weighted_mean" and sum(c.weight for c in self.components) == 0:
            raise ValueError("weighted_mean needs at least one non-zero weight")
        return self
