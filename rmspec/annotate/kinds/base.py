"""What an annotation task kind provides; one module per kind (pairwise, pointwise, process).

A kind is everything that differs between the kinds of labelling, so that the modules along the
round trip ask it instead of comparing kind names: the item fields its tasks show (read from the
canonical rows of a spec), the task `data` and the Label Studio config, the control names of its
results, the checks on a task read back from an export, how a result is read, whether and how
annotations become training rows, and what `annotate agreement` makes of it. The import side's
defaults (nothing checked, results left unread, no rows) are those of a kind recognised but not
read yet (process).
"""

from __future__ import annotations

from typing import Any

from rmspec.annotate.records import Annotation, Task

Scale = tuple[float, float]


class TaskKind:
    name: str = ""  # as task data, meta and exports carry it (`rmspec_kind`): never renamed
    row_kind: str = ""  # the rows an approach trains on that make this kind of task (rmspec.spec.approach)
    swaps: bool = False  # shown in a seeded A/B order: the swap rides in `meta` too, to be undone
    reads: bool = False  # the import reads its results and turns them into training rows
    preferences: bool = False  # its annotations are first/second/tie: counted as votes, compared by agreement
    # Why `annotate agreement` refuses an export holding it; None: compared (preferences) or left out.
    agreement_refusal: str | None = None

    # ------------------------------------------------------------- export (rows -> tasks)

    def item(self, row: dict[str, Any]) -> dict[str, Any]:
        """The fields an item shows besides id, group and prompt, from a canonical row of a spec."""
        raise NotImplementedError

    def rating(self, approach: Any) -> tuple[list[str], Scale | None]:
        """The attributes and scale the annotators rate on (the spec's approach section); none by default."""
        return [], None

    def task_data(
        self, item: dict[str, Any], swapped: bool, attributes: list[str], scale: Scale | None
    ) -> dict[str, Any]:
        """The task's own `data` fields, after the prompt and the rmspec ids every task has."""
        raise NotImplementedError

    def label_config(self, attributes: list[str], scale: Scale | None) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------- import (export -> tasks -> rows)

    def controls(self, row: dict[str, Any]) -> list[str]:
        """The control names of the label config: in a JSON_MIN row, the columns that hold results."""
        return []

    def check_task(self, task: Task, meta: dict[str, Any]) -> None:
        """Set `task.error` when the task lacks what reading its results needs (and `task.swapped`)."""

    def read_result(self, task: Task, record: Annotation, result: list[Any]) -> None:
        """Validate one annotation's result items into `record` (its preference or ratings, or its error)."""

    def rows(
        self, task: Task, valid: list[Annotation], policy: str, ties: str, rejects: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], str, str]:
        """(rows, reason, detail): the task's training rows under `policy`, or why it has none;
        annotations left out (a tie under --ties drop) are appended to `rejects`."""
        raise NotImplementedError
