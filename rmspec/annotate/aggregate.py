"""From parsed tasks to training rows: one per task (majority, unanimous) or per annotation (all).

Nothing is lost silently: every task that yields no row and every annotation that cannot be used
is a reject with its reason, and the counts reconcile
(tasks_read = tasks_with_rows + sum(tasks_rejected); annotations_read = valid + cancelled + invalid).

What a task's valid annotations make is its kind's (rmspec.annotate.kinds): pairwise rows are plain
pairs with a vote-share margin, pointwise rows one column per attribute; a kind not read yet
(process) makes none.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rmspec.annotate import kinds
from rmspec.annotate.records import FIRST, SECOND, TIE, Task, reject
from rmspec.errors import DataError

POLICIES = ("majority", "unanimous", "all")
TIE_POLICIES = ("drop", "keep")


@dataclass
class Imported:
    rows: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)


def aggregate(tasks: list[Task], policy: str = "majority", ties: str = "drop") -> Imported:
    if policy not in POLICIES:
        raise DataError(f"unknown policy {policy!r}", f"choose one of {', '.join(POLICIES)}")
    if ties not in TIE_POLICIES:
        raise DataError(f"unknown ties policy {ties!r}", f"choose one of {', '.join(TIE_POLICIES)}")
    out = Imported()
    task_rejects: Counter[str] = Counter()
    ann: Counter[str] = Counter()
    tasks_with_rows = 0
    for task in tasks:
        for a in task.annotations:
            ann["read"] += 1
            if a.cancelled:
                ann["cancelled"] += 1
            elif a.error or task.error:
                ann["invalid"] += 1
                if not task.error:
                    out.rejects.append(
                        reject(
                            "annotation",
                            task,
                            "invalid_result",
                            a.error,
                            annotator=a.annotator,
                            annotation_id=a.annotation_id,
                        )
                    )
            else:
                ann["valid"] += 1
                if a.preference:
                    ann[a.preference] += 1
        rows, reason, detail = _task_rows(task, policy, ties, out)
        if rows:
            tasks_with_rows += 1
            out.rows.extend(rows)
        else:
            task_rejects[reason] += 1
            out.rejects.append(reject("task", task, reason, detail))
    out.counts = {
        "policy": policy,
        "ties": ties,
        "tasks_read": len(tasks),
        "tasks_with_rows": tasks_with_rows,
        "tasks_rejected": dict(task_rejects),
        "annotations_read": ann["read"],
        "annotations_valid": ann["valid"],
        "annotations_cancelled": ann["cancelled"],
        "annotations_invalid": ann["invalid"],
        "votes": {k: ann[k] for k in (FIRST, SECOND, TIE)} if any(_has_preferences(t) for t in tasks) else None,
        "rows_written": len(out.rows),
        "ties_kept": sum(1 for r in out.rows if r.get("tie")),
    }
    assert out.counts["tasks_read"] == tasks_with_rows + sum(task_rejects.values())
    assert ann["read"] == ann["valid"] + ann["cancelled"] + ann["invalid"]
    return out


def _has_preferences(task: Task) -> bool:
    """Its kind's annotations are votes (first/second/tie); asked of every task, unusable ones too."""
    kind = kinds.get(task.kind)
    return kind is not None and kind.preferences


def _task_rows(task: Task, policy: str, ties: str, out: Imported) -> tuple[list[dict[str, Any]], str, str]:
    """(rows, reason, detail): the task's rows, or why it has none."""
    if task.error:
        return [], "invalid_task", task.error
    if not task.annotations:
        return [], "no_annotation", "nobody labelled this task"
    live = [a for a in task.annotations if not a.cancelled]
    if not live:
        return [], "all_cancelled", f"{len(task.annotations)} annotation(s), all cancelled (skipped)"
    valid = [a for a in live if not a.error]
    if not valid:
        return [], "no_valid_annotation", "; ".join(sorted({a.error or "" for a in live}))
    kind = kinds.of(task.kind)
    if not kind.reads:
        return [], "not_read", f"{kind.name} tasks are not turned into rows yet"
    return kind.rows(task, valid, policy, ties, out.rejects)
