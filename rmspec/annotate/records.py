"""What the task kinds, the export reader and the aggregation share: the fields rmspec writes into a
task, a task and an annotation as read back from an export, and a reject.

It sits below the task kinds (rmspec.annotate.kinds), which read and write these, so that the
modules that dispatch on a kind (tasks, exports, aggregate, agreement) can import the kinds
without a circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Fields rmspec writes into a task's `data` (and `meta`); the label config never shows them.
ID_FIELD, SWAP_FIELD, KIND_FIELD = "rmspec_id", "rmspec_swap", "rmspec_kind"
PROMPT_FIELD, SCALE_FIELD, ATTRIBUTES_FIELD, LABEL_FIELD = (
    "rmspec_prompt",
    "rmspec_scale",
    "rmspec_attributes",
    "rmspec_label",
)
STEP_LABELS_FIELD = "rmspec_step_labels"

# A pairwise preference in the SOURCE order (A/B swap undone).
FIRST, SECOND, TIE = "first", "second", "tie"


@dataclass
class Annotation:
    annotator: str
    annotation_id: Any = None
    cancelled: bool = False
    preference: str | None = None  # pairwise, source order: first / second / tie
    ratings: dict[str, float] | None = None  # pointwise, on the spec's scale
    error: str | None = None  # why this annotation is unusable


@dataclass
class Task:
    task_id: Any
    source_id: str
    kind: str  # as the export has it: a task kind's name (rmspec.annotate.kinds), else unusable
    data: dict[str, Any]
    swapped: bool = False
    annotations: list[Annotation] = field(default_factory=list)
    error: str | None = None  # the task itself is unusable (not an rmspec task, swap unknown)

    @property
    def prompt(self) -> Any:
        return self.data.get(PROMPT_FIELD) or self.data.get("prompt", "")

    def responses(self) -> tuple[str, str]:
        """(first, second) in source order."""
        a, b = self.data.get("response_a", ""), self.data.get("response_b", "")
        return (b, a) if self.swapped else (a, b)


def reject(level: str, task: Task, reason: str, detail: str | None, **extra: Any) -> dict[str, Any]:
    """One line of the import's rejects file: a task that yields no row, or an annotation not used."""
    return {
        "level": level,
        "task_id": task.task_id,
        "source_id": task.source_id,
        "reason": reason,
        "detail": detail or "",
        **extra,
    }


def base_row(task: Task) -> dict[str, Any]:
    """The fields every training row of a task starts with."""
    return {"id": task.source_id, "prompt": task.prompt, "task_id": task.task_id}
