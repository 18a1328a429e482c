"""From parsed tasks to training rows: one per task (majority, unanimous) or per annotation (all).

Nothing is lost silently: every task that yields no row and every annotation that cannot be used
is a reject with its reason, and the counts reconcile
(tasks_read = tasks_with_rows + sum(tasks_rejected); annotations_read = valid + cancelled + invalid).

Pairwise rows are plain pairs (`id`, `prompt`, `chosen`, `rejected`, `margin`) that a spec reads
with `preset: pairs`; `margin` is the vote share (winner votes - loser votes) / valid votes, so
a 3-0 pair gets 1.0 and a 2-1 pair 0.33 (`all` writes 0.0: each row is one person's vote).
Ties kept (`--ties keep`) keep the source order and carry `tie: true`, margin 0.
Pointwise rows carry one column per attribute: the mean rating (majority), the common rating
(unanimous) or each annotator's (all).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rmspec.annotate.exports import FIRST, SECOND, TIE, Task
from rmspec.annotate.source import PAIRWISE, POINTWISE
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
                        _reject(
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
            out.rejects.append(_reject("task", task, reason, detail))
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
        "votes": {k: ann[k] for k in (FIRST, SECOND, TIE)} if any(t.kind == PAIRWISE for t in tasks) else None,
        "rows_written": len(out.rows),
        "ties_kept": sum(1 for r in out.rows if r.get("tie")),
    }
    assert out.counts["tasks_read"] == tasks_with_rows + sum(task_rejects.values())
    assert ann["read"] == ann["valid"] + ann["cancelled"] + ann["invalid"]
    return out


def _reject(level: str, task: Task, reason: str, detail: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "level": level,
        "task_id": task.task_id,
        "source_id": task.source_id,
        "reason": reason,
        "detail": detail or "",
        **extra,
    }


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
    if task.kind == POINTWISE:
        return _pointwise_rows(task, valid, policy)
    return _pairwise_rows(task, valid, policy, ties, out)


def _base(task: Task) -> dict[str, Any]:
    return {"id": task.source_id, "prompt": task.prompt, "task_id": task.task_id}


def _pair(task: Task, winner: str, margin: float, votes: Counter, labels: list[dict[str, Any]]) -> dict[str, Any]:
    first, second = task.responses()
    chosen, rejected = (second, first) if winner == SECOND else (first, second)
    return {
        **_base(task),
        "chosen": chosen,
        "rejected": rejected,
        "margin": margin,
        "tie": winner == TIE,
        "votes": {k: votes[k] for k in (FIRST, SECOND, TIE)},
        "labels": labels,
    }


def _pairwise_rows(task: Task, valid: list[Any], policy: str, ties: str, out: Imported):
    votes = Counter(a.preference for a in valid)
    labels = [{"annotator": a.annotator, "preference": a.preference} for a in valid]
    if policy == "all":
        rows = []
        for a in valid:
            if a.preference == TIE and ties == "drop":
                out.rejects.append(
                    _reject(
                        "annotation",
                        task,
                        "tie",
                        "a tie, dropped (--ties drop)",
                        annotator=a.annotator,
                        annotation_id=a.annotation_id,
                    )
                )
                continue
            rows.append({**_pair(task, a.preference, 0.0, votes, labels), "annotator": a.annotator})
        return (rows, "", "") if rows else ([], "tie", f"all {len(valid)} valid annotation(s) are ties (--ties drop)")
    ranked = votes.most_common()
    if policy == "unanimous" and len(votes) > 1:
        return [], "disagreement", _votes_text(votes)
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return [], "no_majority", _votes_text(votes)
    winner = ranked[0][0]
    if winner == TIE and ties == "drop":
        return [], "tie", f"the label is a tie ({_votes_text(votes)}; --ties drop)"
    margin = 0.0 if winner == TIE else (votes[winner] - votes[FIRST if winner == SECOND else SECOND]) / len(valid)
    return [_pair(task, winner, round(margin, 6), votes, labels)], "", ""


def _votes_text(votes: Counter) -> str:
    return ", ".join(f"{k}: {votes[k]}" for k in (FIRST, SECOND, TIE) if votes[k])


def _pointwise_rows(task: Task, valid: list[Any], policy: str):
    attrs = list(task.data["rmspec_attributes"])
    base = {**_base(task), "response": task.data.get("response", "")}
    labels = [{"annotator": a.annotator, "ratings": a.ratings} for a in valid]
    if policy == "all":
        return [{**base, **a.ratings, "annotator": a.annotator} for a in valid], "", ""
    if policy == "unanimous":
        differing = [x for x in attrs if len({a.ratings[x] for a in valid}) > 1]
        if differing:
            return [], "disagreement", f"annotators differ on {', '.join(differing)}"
    means = {x: sum(a.ratings[x] for a in valid) / len(valid) for x in attrs}
    return [{**base, **means, "labels": labels}], "", ""
