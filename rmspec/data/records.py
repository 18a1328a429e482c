"""The canonical record every preset maps onto, and the reject bookkeeping that rides along.

A record is a plain dict. Which fields it carries depends on the approach:

- pairs (bradley_terry): `prompt_messages` (the conversation before the response, a list of
  {role, content}), `chosen`, `rejected` (the final assistant texts), `margin`, and the optional
  `score_chosen` / `score_rejected` (None when the data has no scores), `tie` (True only for an
  annotated tie that `approach.ties: davidson` trains; otherwise a tie row is a reject);
- pointwise: `prompt_messages`, `response`, `scores` (floats in `approach.attributes` order);
- listwise: `prompt_messages`, `responses` (N >= 2 texts) and `scores` (one per response, higher is
  better; equal scores are tied);
- generative: `messages` (the whole conversation, ending with the assistant turn to learn);
- process: `prompt_messages`, `steps` (the reasoning steps, texts) and `step_labels` (1 correct,
  0 wrong, one per step).

Every record also carries `source_index` (row number in the source), `source` (the name of its
dataset in a mixture), `id`, `group`, `augmented`, `tools` (its messages' tool calls and results as
JSON text, "" if none: rmspec.data.tool_store) and the reject fields. A rejected row keeps flowing through the dataset with `reject_reason` set
(and `raw`, the source row as JSON, when it was rejected before it could be mapped), so that the
rejects are data: cached, counted and written out at the end, never lost in a side effect.
"""

from __future__ import annotations

import json
from typing import Any

from rmspec.spec.row_kinds import RowKind

TOOL_KEYS = ("tool_calls", "name", "tool_call_id")  # rmspec.data.tool_store's, kept in the prompt key (identity)

BOOKKEEPING = ("source_index", "id", "group", "augmented", "reject_stage", "reject_reason", "reject_detail", "raw")
FIELDS = {
    RowKind.PAIRS: ("prompt_messages", "chosen", "rejected", "margin", "score_chosen", "score_rejected", "tie"),
    RowKind.LIST: ("prompt_messages", "responses", "scores"),
    RowKind.SCORED: ("prompt_messages", "response", "scores"),
    RowKind.MESSAGES: ("messages",),
    RowKind.STEPS: ("prompt_messages", "steps", "step_labels"),
}


class Reject(Exception):
    """Raised inside a row mapper or filter: this row leaves, for this reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def features(approach: str, images: bool = False):
    """The record's Arrow features; `images`: the data has images (rmspec.vision.rows), so each record
    carries an `images` column, the references to its checked images (text data keeps its features)."""
    from datasets import Features, List, Value

    message = List({"role": Value("string"), "content": Value("string")})
    common = {
        "source_index": Value("int64"),
        "id": Value("string"),
        "group": Value("string"),
        "augmented": Value("bool"),
        "reject_stage": Value("string"),
        "reject_reason": Value("string"),
        "reject_detail": Value("string"),
        "raw": Value("string"),
        "prompt_key": Value("string"),
        "source": Value("string"),  # the name of the dataset the row came from (data.sources[].name; 'train')
        "tools": Value("string"),  # the messages' tool calls and results as JSON ("" if none): rmspec.data.tool_store
    }
    if approach == RowKind.PAIRS:
        body = {
            "prompt_messages": message,
            "chosen": Value("string"),
            "rejected": Value("string"),
            "margin": Value("float64"),
            "score_chosen": Value("float64"),
            "score_rejected": Value("float64"),
            "tie": Value("bool"),
        }
    elif approach == RowKind.LIST:
        body = {"prompt_messages": message, "responses": List(Value("string")), "scores": List(Value("float64"))}
    elif approach == RowKind.SCORED:
        body = {"prompt_messages": message, "response": Value("string"), "scores": List(Value("float64"))}
    elif approach == RowKind.STEPS:
        body = {"prompt_messages": message, "steps": List(Value("string")), "step_labels": List(Value("int8"))}
    else:
        body = {"messages": message}
    if images:
        body["images"] = List(Value("string"))
    return Features({**common, **body})


def empty_record(approach: str) -> dict[str, Any]:
    if approach == RowKind.PAIRS:
        return {
            "prompt_messages": [],
            "chosen": "",
            "rejected": "",
            "margin": 0.0,
            "score_chosen": None,
            "score_rejected": None,
            "tie": False,
        }
    if approach == RowKind.LIST:
        return {"prompt_messages": [], "responses": [], "scores": []}
    if approach == RowKind.SCORED:
        return {"prompt_messages": [], "response": "", "scores": []}
    if approach == RowKind.STEPS:
        return {"prompt_messages": [], "steps": [], "step_labels": []}
    return {"messages": []}


def prompt_text(messages: list[dict[str, str]]) -> str:
    """The prompt as plain text for filters and reports (one user turn: its content)."""
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def to_json_row(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, default=_json_value)


def _json_value(value: Any) -> str:
    """Bytes (an image's, up to megabytes) are named by their size in rejects.jsonl, not dumped."""
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return str(value)
