"""Rows as the model will see them, for `rmspec data preview`."""

from __future__ import annotations

from typing import Any

from rmspec.data.pipeline import load_canonical
from rmspec.spec.row_kinds import RowKind


def preview_records(loaded: Any, tokenizer: Any, n: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The first n kept rows after mapping and filters (chat template applied), and the rejects met on the way.

    Reads at most max(1000, 50 n) source rows: a preview, not a pass over a large dataset."""
    ds, report = load_canonical(loaded, tokenizer, limit=max(1000, 50 * n))
    approach = loaded.spec.approach
    rows_kind = approach.row_kind  # the rows the approach trains on: what a preview row shows
    out = []
    for row in ds.select(range(min(n, len(ds)))):
        rec: dict[str, Any] = {"id": row["id"]}
        if row["group"]:
            rec["group"] = row["group"]
        if rows_kind == RowKind.PAIRS:
            rec.update(prompt=row["prompt"], chosen=row["chosen"], rejected=row["rejected"])
            if row["margin"]:
                rec["margin"] = row["margin"]
        elif rows_kind == RowKind.LIST:
            rec.update(
                prompt=row["prompt"],
                responses=[{"score": s, "response": r} for s, r in zip(row["scores"], row["responses"])],
            )
        elif rows_kind == RowKind.MESSAGES:
            rec.update(messages=row["messages"], text=tokenizer.decode(row["input_ids"]))
        elif rows_kind == RowKind.STEPS:  # each step with its label, as the model learns it
            rec.update(
                prompt=row["prompt"],
                steps="\n".join(
                    f"[{'+' if lab else '-'}] {step}" for step, lab in zip(row["steps"], row["step_labels"])
                ),
            )
            if row.get("steps_dropped"):
                rec["steps_dropped_past_max_length"] = row["steps_dropped"]
        else:
            rec.update(
                prompt=row["prompt"], response=row["response"], scores=dict(zip(approach.attributes, row["scores"]))
            )
        if row.get("truncated"):
            rec["truncated"] = True
        out.append(rec)
    return out, report.rejected
