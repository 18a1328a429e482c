"""`approach:` how the reward model learns. The spec's side of every approach: the base class of the
sections (each approach's own section, options and rules live in its module under rmspec/approaches/)
and the list of sections the spec accepts, which the approach registry fills (rmspec.spec.root.use_sections)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Union

from pydantic import Field

from rmspec.spec.base import Problem, Section

# The row kinds (rmspec.spec.row_kinds), named here for the sections that declare their rows.
from rmspec.spec.row_kinds import LIST, MESSAGES, PAIRS, SCORED, STEPS

__all__ = ["LIST", "MESSAGES", "PAIRS", "PAIR_METRICS", "SCORED", "SECTIONS", "STEPS", "ApproachSection"]

# The validation metrics a pair-scoring approach logs (metrics.jsonl names); the first is the default
# metric that picks the final model.
PAIR_METRICS = ("eval/rm/accuracy", "eval/rm/loss", "eval/rm/reward_margin")


class ApproachSection(Section):
    """What every `approach:` section tells the spec checks (rmspec.spec.rules): the rows it trains on,
    the validation metrics it logs, and its own cross-field rules. The rest of an approach (sizing,
    trainer, evaluation, init) is declared in its module under rmspec/approaches/."""

    if TYPE_CHECKING:  # each section's own `kind: Literal["<name>"]` field tells the union's members apart
        kind: str

    rows: ClassVar[str] = PAIRS
    # Validation metrics that can pick the final model (training.best_metric), the default first.
    best_metrics: ClassVar[tuple[str, ...]] = PAIR_METRICS
    # What early stopping may watch; None: not checked (the approach did not say).
    logged_metrics: ClassVar[tuple[str, ...] | None] = None

    def problems(self, spec: Any) -> Iterator[Problem]:
        """This approach's own cross-field rules: (path, message, hint)."""
        return iter(())

    @property
    def margin_mode(self) -> str:
        """How a per-pair margin enters the loss; only a pairwise loss reads one."""
        return "none"

    @property
    def row_kind(self) -> str:
        """The rows this spec's approach trains on: `rows`, unless an option changes them (a judge
        trained by GRPO reads pairs)."""
        return self.rows

    def extra_needs(self) -> list[tuple[str, str]]:
        """(what asks, the extra) for the optional packages this approach's run imports
        (rmspec.extras reads it before a run starts)."""
        return []

    # What the stages outside the approach read of its options, declared here with the value every
    # other approach has (a section overrides the ones its options change): the data stage, the
    # planner and the scorers ask these, never an option by name.

    @property
    def tie_rows(self) -> str:
        """What a row labelled tie becomes (rmspec.data.presets): "reject" (reason `tie`), or the tie
        option of a loss that trains ties (Bradley-Terry's davidson, a GRPO judge's verdict)."""
        return "reject"

    @property
    def margin_table(self) -> dict[float, float] | None:
        """Labelled strengths remapped before a pairwise loss (Bradley-Terry's margin_map); None: as labelled."""
        return None

    @property
    def score_attributes(self) -> list[str]:
        """The score attributes a row keeps (pointwise's attributes); none for other approaches."""
        return []

    @property
    def step_suffix(self) -> str | None:
        """The text appended to every reasoning step, whose last token carries the step's label (a process
        reward model's step_separator); None: the rows have no steps."""
        return None

    @property
    def trained_heads(self) -> int:
        """Score heads trained side by side (ODIN's quality and length heads, an ensemble's members); the
        saved model keeps one. 1: one head."""
        return 1

    @property
    def reinforcement(self) -> Any:
        """The GRPO settings (approach.grpo) when this approach trains by reinforcement (a judge with
        method: grpo: its rows, trainer, plan and exporter differ); None: trained by its loss."""
        return None


# The approach sections the spec accepts, in the registry's order (the order of the schema's choices):
# rmspec.approaches hands them to rmspec.spec.root.use_sections when it loads and when an approach is
# registered at run time (a plugin, a test).
SECTIONS: list[type[ApproachSection]] = []


def approach_union(sections: list[type[ApproachSection]]) -> Any:
    """The `approach:` type: the sections, told apart by `kind`."""
    return Annotated[Union[tuple(sections)], Field(discriminator="kind")]  # noqa: UP007  (a runtime tuple)
