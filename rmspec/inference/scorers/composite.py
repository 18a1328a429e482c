"""`rmspec score RUN FILE` for a composite run: each row's reward, one column per component
(its raw value, null where it failed or its route left it out) and `<name>_error` (the failure
reason, or null). A row whose reward cannot be given (a component failed under on_failure: error)
goes to the rejects file with the reason `component_failed` and which component failed why."""

from __future__ import annotations

from typing import Any

from rmspec.composite.combine import RowReward
from rmspec.composite.outcome import Item
from rmspec.composite.rows import item_from_row
from rmspec.composite.scorer import CompositeScorer
from rmspec.inference.scorers.shapes import Shape
from rmspec.score.reader import BadRow

COMPOSITE = "composite"


def composite_shape(scorer: CompositeScorer) -> Shape:
    c = scorer.composite
    columns = {"prompt": c.columns.prompt, "response": c.columns.response, "label": c.columns.label}
    if c.route_by is not None:
        columns["route"] = c.route_by
    return Shape(COMPOSITE, columns)


def columns(scorer: CompositeScorer, scored: RowReward) -> dict[str, Any]:
    out: dict[str, Any] = {"reward": scored.reward}
    for name in scorer.labels:
        out[name] = scored.values.get(name)
        out[f"{name}_error"] = scored.failures.get(name)
    if scorer.composite.gates:
        out["gate"] = scored.gate  # the gate that set the floor, or null
    return out


def score_chunk(
    scorer: CompositeScorer, shape: Shape, chunk: list[Any], first_index: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(scored rows in input order, rejects) of one chunk."""
    kept: list[tuple[int, dict[str, Any], Item]] = []
    rejects = []
    for k, row in enumerate(chunk):
        index = first_index + k
        if isinstance(row, BadRow):
            rejects.append({"row": index, "reason": row.reason, "reason_kind": row.kind, "input": row.raw})
            continue
        item = item_from_row(row, scorer.composite)
        if isinstance(item, str):
            rejects.append({"row": index, "reason": item, "reason_kind": "missing_response", "input": row})
        else:
            kept.append((index, row, item))
    rows = []
    for (index, row, _), scored in zip(kept, scorer.score_items([item for _, _, item in kept])):
        cols = columns(scorer, scored)
        if scored.reward is None:
            rejects.append(
                {"row": index, "reason": scored.error, "reason_kind": "component_failed", "input": row, **cols}
            )
            continue
        out = dict(row)
        for name, value in cols.items():
            out[name if name not in row else f"rmspec_{name}"] = value
        rows.append(out)
    return rows, rejects
