"""The `data.filters` list, applied in order. A filter never deletes a row: it marks it rejected
(stage `filter:<kind>`, a reason, a detail), and the rejects are written out at the end.

Row-wise filters are batched `datasets.map` calls; `dedup` keeps a set of hashes (first
occurrence wins; a row's hash is rmspec.data.identity's: the prompt is its text and its pictures)
and `sample` draws seeded indices among the rows still alive.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

from rmspec.data.identity import row_key
from rmspec.data.records import prompt_text
from rmspec.errors import DataError
from rmspec.spec.row_kinds import RowKind

RowCheck = Callable[[dict[str, list], int], "tuple[str, str] | None"]


def row_filter(spec: Any, approach: str, margin_mapped: bool) -> RowCheck | None:
    """A per-row check (reason, detail) or None for the stateless filters; None for the others."""
    kind = spec.kind
    if kind == "drop_empty":
        return lambda b, i: _empty(b, i, approach)
    if kind == "drop_identical":
        if approach != RowKind.PAIRS:
            raise DataError("data.filters: drop_identical applies to pairs (approach bradley_terry)", "remove it")
        return _identical
    if kind == "regex":
        pattern = re.compile(spec.pattern)
        fields = _regex_fields(spec.field, approach)
        include = spec.action == "include"

        def check(b: dict[str, list], i: int):
            hit = any(pattern.search(_field_text(b, i, f)) for f in fields)
            if include and not hit:
                return "regex_no_match", f"no {spec.field} matches {spec.pattern!r}"
            if not include and hit:
                return "regex_match", f"{spec.field} matches {spec.pattern!r}"
            return None

        return check
    if kind == "min_score_gap":
        if approach != RowKind.PAIRS:
            raise DataError("data.filters: min_score_gap applies to pairs (approach bradley_terry)", "remove it")

        def gap(b: dict[str, list], i: int):
            sc, sr = b["score_chosen"][i], b["score_rejected"][i]
            if sc is not None and sr is not None:
                value = sc - sr
            elif margin_mapped:
                value = b["margin"][i]
            else:
                return "missing_score", "the pair has no score_chosen/score_rejected and no margin column is mapped"
            if value < spec.gap:
                return "score_gap_below_min", f"score gap {value:g} < {spec.gap:g}"
            return None

        return gap
    return None


def _empty(b: dict[str, list], i: int, approach: str):
    if approach == RowKind.PAIRS:
        for f in ("chosen", "rejected"):
            if not b[f][i].strip():
                return "empty", f"{f} is empty"
    elif approach == RowKind.SCORED:
        if not b["response"][i].strip():
            return "empty", "response is empty"
    elif approach == RowKind.LIST:
        empty = [k for k, r in enumerate(b["responses"][i]) if not r.strip()]
        if empty:
            return "empty", f"response {empty[0]} is empty"
    elif approach == RowKind.STEPS:
        if not b["steps"][i] or any(not s.strip() for s in b["steps"][i]):
            return "empty", "a step is empty"
    else:
        calls = set(json.loads(b["tools"][i]).get("messages", {})) if b.get("tools") and b["tools"][i] else set()
        turns = enumerate(b["messages"][i])  # a turn that only calls tools (rmspec.data.tool_store) has no text
        if any(not m["content"].strip() for k, m in turns if m["role"] == "assistant" and str(k) not in calls):
            return "empty", "an assistant message is empty"
        return None
    msgs = b["prompt_messages"][i]
    if msgs and not any(m["content"].strip() for m in msgs):
        return "empty", "prompt is empty"
    return None


def _identical(b: dict[str, list], i: int):
    if b["chosen"][i].strip() == b["rejected"][i].strip():
        return "identical", "chosen and rejected are the same text"
    if "chosen_input_ids" in b and b["chosen_input_ids"][i] and b["chosen_input_ids"][i] == b["rejected_input_ids"][i]:
        return "identical_after_truncation", "chosen and rejected are the same tokens after truncation"
    return None


def _regex_fields(field: str, approach: str) -> list[str]:
    by_rows: dict[str, list[str]] = {
        RowKind.PAIRS: ["prompt", "chosen", "rejected"],
        RowKind.SCORED: ["prompt", "response"],
        RowKind.MESSAGES: ["prompt", "response"],
        RowKind.STEPS: ["prompt", "response"],
        RowKind.LIST: ["prompt", "response"],
    }
    available = by_rows[approach]
    if field == "any":
        return available
    if field not in available:
        raise DataError(
            f"data.filters: regex field {field!r} does not exist for approach {approach}",
            f"use one of {', '.join(available)} or any",
        )
    return [field]


def _field_text(b: dict[str, list], i: int, field: str) -> str:
    if "steps" in b and field == "response":  # process: the steps, one per line
        return "\n".join(b["steps"][i])
    if "responses" in b and field == "response":  # listwise: any of the responses, one per line
        return "\n".join(b["responses"][i])
    if "messages" in b:  # generative: prompt = turns before the last reply
        msgs = b["messages"][i]
        return msgs[-1]["content"] if field == "response" else prompt_text(msgs[:-1])
    if field == "prompt":
        return prompt_text(b["prompt_messages"][i])
    return b[field][i]


def map_row_check(check: RowCheck, stage: str) -> Callable[[dict[str, list]], dict[str, list]]:
    """Wrap a row check as a batched map function that marks the rows it rejects."""

    def apply(batch: dict[str, list]) -> dict[str, list]:
        for i in range(len(batch["id"])):
            if batch["reject_reason"][i]:
                continue
            verdict = check(batch, i)
            if verdict:
                batch["reject_stage"][i], (batch["reject_reason"][i], batch["reject_detail"][i]) = stage, verdict
        return batch

    return apply


class Dedup:
    """Batched map, run in one process in order: the first occurrence stays."""

    def __init__(self, on: str, approach: str, stage: str = "filter:dedup"):
        self.on, self.approach, self.stage = on, approach, stage
        self.seen: dict[str, str] = {}

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        for i in range(len(batch["id"])):
            if batch["reject_reason"][i]:
                continue
            h = row_key(batch, i, self.on, self.approach)  # text, tools and pictures (rmspec.data.identity)
            if h in self.seen:
                batch["reject_stage"][i], batch["reject_reason"][i] = self.stage, "duplicate"
                batch["reject_detail"][i] = f"same {'prompt' if self.on == 'prompt' else 'row'} as id {self.seen[h]}"
            else:
                self.seen[h] = batch["id"][i]
        return batch


def sample_keep(alive: list[int], n: int | None, fraction: float | None, seed: int) -> set[int]:
    """Seeded choice among the live row positions."""
    if n is not None:
        k = n
    else:
        assert fraction is not None  # SampleFilter: exactly one of n or fraction
        k = round(len(alive) * fraction)
    if k >= len(alive):
        return set(alive)
    return set(random.Random(seed).sample(alive, k))
