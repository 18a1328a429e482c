"""Pointwise tasks: one star rating per attribute of the spec, on its integer scale.

Rows carry one column per attribute: the mean rating (majority), the common rating (unanimous) or
each annotator's (all). Agreement is computed on pairwise preferences only, so it refuses these.
"""

from __future__ import annotations

from typing import Any

from rmspec.annotate.kinds.base import Scale, TaskKind
from rmspec.annotate.label_config import pointwise_config
from rmspec.annotate.records import ATTRIBUTES_FIELD, SCALE_FIELD, Annotation, Task, base_row
from rmspec.spec.approach import SCORED


class Pointwise(TaskKind):
    name = "pointwise"
    row_kind = SCORED
    reads = True
    agreement_refusal = "this export holds pointwise ratings"

    def item(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"response": row["response"], "scores": list(row["scores"])}

    def rating(self, approach: Any) -> tuple[list[str], Scale | None]:
        # a section with attributes and a scale (rows of scores)
        return list(approach.attributes), (approach.scale.min, approach.scale.max)

    def task_data(
        self, item: dict[str, Any], swapped: bool, attributes: list[str], scale: Scale | None
    ) -> dict[str, Any]:
        assert scale is not None  # a pointwise source has its rating scale (load_source)
        return {"response": item["response"], SCALE_FIELD: list(scale), ATTRIBUTES_FIELD: attributes}

    def label_config(self, attributes: list[str], scale: Scale | None) -> str:
        assert scale is not None  # a pointwise source has its rating scale (load_source)
        return pointwise_config(attributes, scale)

    def controls(self, row: dict[str, Any]) -> list[str]:
        return list(row.get(ATTRIBUTES_FIELD) or [])

    def check_task(self, task: Task, meta: dict[str, Any]) -> None:
        scale, attrs = task.data.get(SCALE_FIELD), task.data.get(ATTRIBUTES_FIELD)
        if not (isinstance(scale, list) and len(scale) == 2 and isinstance(attrs, list) and attrs):
            task.error = f"task {task.task_id}: data lacks {SCALE_FIELD}/{ATTRIBUTES_FIELD}"

    def read_result(self, task: Task, record: Annotation, result: list[Any]) -> None:
        attrs = list(task.data[ATTRIBUTES_FIELD])
        low, high = task.data[SCALE_FIELD]
        stars = int(high - low) + 1
        ratings: dict[str, float] = {}
        for item in result:
            if not isinstance(item, dict):
                record.error = "a result item is not an object"
                return
            name, value = item.get("from_name"), item.get("value")
            if not isinstance(name, str) or name not in attrs:
                record.error = f"unknown from_name {name!r} (the label config rates {', '.join(attrs)})"
                return
            rating = value.get("rating") if isinstance(value, dict) else None
            if (
                isinstance(rating, bool)
                or not isinstance(rating, (int, float))
                or rating != int(rating)
                or not 1 <= rating <= stars
            ):
                record.error = f"{name}: value.rating must be a whole number of stars from 1 to {stars}, got {rating!r}"
                return
            if name in ratings and ratings[name] != low + rating - 1:
                record.error = f"{name}: rated twice with different values"
                return
            ratings[name] = low + rating - 1
        missing = [a for a in attrs if a not in ratings]
        if missing:
            record.error = f"no rating for {', '.join(missing)}"
            return
        record.ratings = ratings

    def rows(
        self, task: Task, valid: list[Any], policy: str, ties: str, rejects: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], str, str]:
        # `valid` as Any: a valid pointwise annotation has its ratings (read_result sets them or an error)
        attrs = list(task.data[ATTRIBUTES_FIELD])
        base = {**base_row(task), "response": task.data.get("response", "")}
        labels = [{"annotator": a.annotator, "ratings": a.ratings} for a in valid]
        if policy == "all":
            return [{**base, **a.ratings, "annotator": a.annotator} for a in valid], "", ""
        if policy == "unanimous":
            differing = [x for x in attrs if len({a.ratings[x] for a in valid}) > 1]
            if differing:
                return [], "disagreement", f"annotators differ on {', '.join(differing)}"
        means = {x: sum(a.ratings[x] for a in valid) / len(valid) for x in attrs}
        return [{**base, **means, "labels": labels}], "", ""


KIND = Pointwise()
