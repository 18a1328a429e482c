"""Pairwise tasks: which of two responses is better, or a tie.

Position bias: A and B are shown in a seeded random order; the swap rides in `data` and `meta` and
is undone on import, so a preference is "first" / "second" / "tie" in the SOURCE order. Rows are
plain pairs (`id`, `prompt`, `chosen`, `rejected`, `margin`) that a spec reads with `preset: pairs`;
`margin` is the vote share (winner votes - loser votes) / valid votes, so a 3-0 pair gets 1.0 and a
2-1 pair 0.33 (`all` writes 0.0: each row is one person's vote). Ties kept (`--ties keep`) keep the
source order and carry `tie: true`, margin 0.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rmspec.annotate.kinds.base import Scale, TaskKind
from rmspec.annotate.label_config import PAIRWISE_NAME, TIE_CHOICE, TIE_NAME, pairwise_config
from rmspec.annotate.records import FIRST, LABEL_FIELD, SECOND, SWAP_FIELD, TIE, Annotation, Task, base_row, reject
from rmspec.spec.approach import PAIRS


class Pairwise(TaskKind):
    name = "pairwise"
    row_kind = PAIRS
    swaps = True
    reads = True
    preferences = True

    def item(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"first": row["chosen"], "second": row["rejected"], "label": "first"}  # chosen is first

    def task_data(
        self, item: dict[str, Any], swapped: bool, attributes: list[str], scale: Scale | None
    ) -> dict[str, Any]:
        a, b = (item["second"], item["first"]) if swapped else (item["first"], item["second"])
        data: dict[str, Any] = {"response_a": a, "response_b": b, SWAP_FIELD: swapped}
        if item.get("label"):
            data[LABEL_FIELD] = item["label"]  # the source's own label, for `disagree` audits
        return data

    def label_config(self, attributes: list[str], scale: Scale | None) -> str:
        return pairwise_config()

    def controls(self, row: dict[str, Any]) -> list[str]:
        return [PAIRWISE_NAME, TIE_NAME]

    def check_task(self, task: Task, meta: dict[str, Any]) -> None:
        data = task.data
        given = [v for v in (meta.get(SWAP_FIELD), data.get(SWAP_FIELD)) if v is not None]
        swaps = {v for v in given if isinstance(v, bool)}
        if len(swaps) != 1 or len(swaps) < len(set(map(str, given))):
            task.error = f"task {task.task_id}: {SWAP_FIELD} is missing, not true/false, or contradictory ({sorted(map(str, given))}): the A/B order cannot be undone"
            return
        task.swapped = swaps.pop()
        if not isinstance(data.get("response_a"), str) or not isinstance(data.get("response_b"), str):
            task.error = f"task {task.task_id}: data lacks response_a/response_b"

    def read_result(self, task: Task, record: Annotation, result: list[Any]) -> None:
        picks: set[str] = set()
        for item in result:
            if not isinstance(item, dict):
                record.error = "a result item is not an object"
                return
            name, value = item.get("from_name"), item.get("value")
            if name == PAIRWISE_NAME:
                selected = value.get("selected") if isinstance(value, dict) else None
                if selected is None:
                    record.error = f"{PAIRWISE_NAME}: value.selected is missing"
                    return
                if selected not in ("left", "right"):
                    record.error = f"{PAIRWISE_NAME}: value.selected must be left or right, got {selected!r}"
                    return
                shown_first = selected == "left"  # left = response A
                picks.add(FIRST if shown_first != task.swapped else SECOND)
            elif name == TIE_NAME:
                choices = value.get("choices") if isinstance(value, dict) else None
                if choices != [TIE_CHOICE]:
                    record.error = f"{TIE_NAME}: value.choices must be [{TIE_CHOICE!r}], got {choices!r}"
                    return
                picks.add(TIE)
            else:
                record.error = f"unknown from_name {name!r} (the label config has {PAIRWISE_NAME!r} and {TIE_NAME!r})"
                return
        if not picks:
            record.error = "empty result: neither a choice nor a tie"
        elif len(picks) > 1:
            record.error = f"conflicting result: {' and '.join(sorted(picks))}"
        else:
            record.preference = picks.pop()

    def rows(
        self, task: Task, valid: list[Annotation], policy: str, ties: str, rejects: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], str, str]:
        votes = Counter(a.preference for a in valid)
        labels = [{"annotator": a.annotator, "preference": a.preference} for a in valid]
        if policy == "all":
            rows = []
            for a in valid:
                if a.preference == TIE and ties == "drop":
                    rejects.append(
                        reject(
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
            return (
                (rows, "", "") if rows else ([], "tie", f"all {len(valid)} valid annotation(s) are ties (--ties drop)")
            )
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


def _pair(task: Task, winner: Any, margin: float, votes: Counter, labels: list[dict[str, Any]]) -> dict[str, Any]:
    first, second = task.responses()
    chosen, rejected = (second, first) if winner == SECOND else (first, second)
    return {
        **base_row(task),
        "chosen": chosen,
        "rejected": rejected,
        "margin": margin,
        "tie": winner == TIE,
        "votes": {k: votes[k] for k in (FIRST, SECOND, TIE)},
        "labels": labels,
    }


def _votes_text(votes: Counter) -> str:
    return ", ".join(f"{k}: {votes[k]}" for k in (FIRST, SECOND, TIE) if votes[k])


KIND = Pairwise()
