"""The annotation task kinds: one module each, with a `KIND` object (rmspec.annotate.kinds.base).

The one home of what differs between pairwise, pointwise and process labelling; source, tasks,
exports, aggregate and agreement ask a kind (`of(task.kind).read_result(...)`) instead of comparing
its name. A kind's name is the string that task data and exports carry (`rmspec_kind`).
"""

from __future__ import annotations

from rmspec.annotate.kinds import pairwise, pointwise, process
from rmspec.annotate.kinds.base import TaskKind

KINDS: dict[str, TaskKind] = {k.name: k for k in (pairwise.KIND, pointwise.KIND, process.KIND)}
# The rows an approach trains on (rmspec.spec.approach) -> the kind of task they make.
BY_ROWS: dict[str, TaskKind] = {k.row_kind: k for k in KINDS.values()}
PAIRWISE = pairwise.KIND.name  # what a file of rows holds (pairs)


def get(name: object) -> TaskKind | None:
    """The kind of that name; None for anything else an export may hold there (absent, a typo, a list)."""
    return KINDS.get(name) if isinstance(name, str) else None


def of(name: str) -> TaskKind:
    """The kind of a task read without error (its name was checked on reading)."""
    return KINDS[name]
