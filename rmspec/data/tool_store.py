"""Tool turns through Arrow: how a record's tool calls and tool results are stored and restored.

Rows are stored with `datasets` (Arrow), whose message type is `{role, content}`. Tool parts do not
fit it: an extra message key fails the cast, and a call's `arguments` is an object of any keys, which
Arrow would unify across rows (filling the keys a row lacks with null, 2 becoming 2.0 next to a
2.5), so the template would render arguments the source never had. So the tool parts of a record's
messages (assistant `tool_calls`; a tool turn's `name` and `tool_call_id`) leave the messages when
the record is mapped (`pack`) and ride in the row's `tools` column as JSON text ("" when the row
has none); the tokenize stage puts them back (`restore`) before the layout renders the
conversation, and a row whose chat template drops one of them leaves as a reject
(`template_drops_tools`, with the field path and the template named) instead of training on a
conversation that silently lost its tool turns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rmspec.data.records import TOOL_KEYS
from rmspec.messages import Invalid

LISTS = ("prompt_messages", "messages")


def pack(record: dict[str, Any]) -> str:
    """Take the tool parts out of the record's message lists (in place); their JSON text, "" if none."""
    stored: dict[str, dict[str, dict[str, Any]]] = {}
    for key in LISTS:
        parts = {}
        for i, m in enumerate(record.get(key) or []):
            extra = {k: m.pop(k) for k in TOOL_KEYS if k in m}
            if extra:
                parts[str(i)] = extra
        if parts:
            stored[key] = parts
    # key order kept (no sort_keys): templates print arguments in the order they were given
    return json.dumps(stored, ensure_ascii=False) if stored else ""


def restore(messages: list[dict[str, Any]], stored: str | None, key: str) -> list[dict[str, Any]]:
    """`messages` as stored, with the tool parts `pack` took out of them put back."""
    if not stored:
        return messages
    parts = json.loads(stored).get(key, {})
    return [{**m, **parts.get(str(i), {})} for i, m in enumerate(messages)]


def restored_batch(
    batch: dict[str, list], layout: Any, reject: Callable[[dict[str, list], int, str, str], None]
) -> tuple[dict[str, list], dict[str, list]]:
    """For the tokenize stage: (the batch with the tool parts back in its messages, for the layout;
    the stored message lists, to write back unchanged). A live row whose chat template drops a tool
    call or result becomes a reject `template_drops_tools` (through `reject`)."""
    stored = batch.get("tools")
    if not stored or not any(stored):
        return batch, {}
    key = "prompt_messages" if "prompt_messages" in batch else "messages"
    msgs = list(batch[key])
    for i, text in enumerate(stored):
        if not text or batch["reject_reason"][i]:
            continue
        msgs[i] = restore(msgs[i], text, key)
        try:
            layout.check_tools(msgs[i], key, whole=key == "messages")
        except Invalid as exc:
            reject(batch, i, "template_drops_tools", f"{exc.field}: {exc.detail}")
    return {**batch, key: msgs}, {key: batch[key]}


def arrow_typed_arguments(feature: Any) -> bool:
    """Whether a source's Arrow types hold tool calls whose `arguments` became a struct (Arrow's JSON
    reader unified the objects of all rows): such a file is read line by line instead."""
    if isinstance(feature, dict):
        fn = feature.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), dict):
            return True
        return any(arrow_typed_arguments(f) for f in feature.values())
    if isinstance(feature, list | tuple):
        return any(arrow_typed_arguments(f) for f in feature)
    inner = getattr(feature, "feature", None)  # datasets' List / Sequence / LargeList
    return inner is not None and arrow_typed_arguments(inner)
