"""The identity of a row: the one home of "which rows share a prompt" and "which rows are the same".

"The prompt" is its text and its pictures. :func:`prompt_key` hashes the turns before the response
(role and text, and the tool calls and results a turn carries) together with the content of the
row's pictures, in order. The grouped split (rmspec.data.split), `dedup` on the prompt or on the row
(rmspec.data.filters), helpsteer2's `pair_by`, the cross-prompt augmentations and the data report's
exact-duplicates figure all read this key (the record's ``prompt_key`` column, computed once when a
row is mapped) or :func:`row_key`, which builds on it. No other module hashes a prompt.

A picture is identified by the SHA-256 of its bytes as stored: a file's bytes (the record refers to
it by absolute path), a ``data:`` URI's decoded payload (the bytes a row gave inline, or a download).
So the same file given by path in one row and as bytes in another is one picture; two files with the
same pixels but encoded differently are two pictures. Bytes, not decoded pixels, because they are
cheap (no second decode of every image) and the same on every machine: a JPEG's decoded pixels
depend on the libjpeg build, and the split must not change with the installed Pillow.

A row without pictures keeps the key it always had (its text and tools only), so text data splits
and de-duplicates exactly as before.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import unquote_to_bytes

from rmspec.data.records import TOOL_KEYS
from rmspec.spec.row_kinds import RowKind


def prompt_key(record: dict[str, Any]) -> str:
    """Stable hash of a record's prompt, its pictures included: the unit of the grouped split and of
    prompt de-duplication. Generative rows: everything before the last turn is the prompt."""
    if "messages" in record and "prompt_messages" not in record:
        msgs = record["messages"][:-1]
    else:
        msgs = record["prompt_messages"]
    turns: Any = [_key_turn(m) for m in msgs]
    pictures = record.get("images") or []
    if pictures:  # a dict never encodes as a list of turns: a text-only key cannot collide with it
        turns = {"turns": turns, "pictures": picture_digests(pictures)}
    return _digest(turns)


def row_key(batch: dict[str, list], i: int, on: str, approach: str) -> str:
    """Hash of row ``i`` of a batch of records: its prompt (``on: prompt``) or the whole row (``on: row``:
    the prompt key, pictures included, and the responses with their labels)."""
    prompt = batch["prompt_key"][i]
    if on == "prompt":
        return _digest(prompt)
    if approach == RowKind.PAIRS:
        parts: list[Any] = [prompt, batch["chosen"][i], batch["rejected"][i]]
    elif approach == RowKind.SCORED:
        parts = [prompt, batch["response"][i], batch["scores"][i]]
    elif approach == RowKind.STEPS:
        parts = [prompt, batch["steps"][i], batch["step_labels"][i]]
    elif approach == RowKind.LIST:
        parts = [prompt, batch["responses"][i], batch["scores"][i]]
    else:  # a whole conversation: every turn as written, its tool calls, and the prompt's pictures
        parts = [[m["role"], m["content"]] for m in batch["messages"][i]]
        if batch.get("tools") and batch["tools"][i]:  # conversations that differ only in tool calls differ
            parts.append(batch["tools"][i])
        if batch.get("images") and batch["images"][i]:
            parts.append({"prompt": prompt})
    return _digest(parts)


def row_key_columns(approach: str, columns: Sequence[str]) -> list[str]:
    """The columns :func:`row_key` reads for ``on: row`` (those of ``columns`` that exist)."""
    bodies: dict[str, list[str]] = {
        RowKind.PAIRS: ["chosen", "rejected"],
        RowKind.SCORED: ["response", "scores"],
        RowKind.STEPS: ["steps", "step_labels"],
        RowKind.LIST: ["responses", "scores"],
    }
    body = bodies.get(approach, ["messages", "tools", "images"])
    return [c for c in ("prompt_key", "id", *body) if c in columns]


def picture_digests(refs: Sequence[str]) -> list[str]:
    """One content digest per picture reference, in order (see the module docstring)."""
    return [picture_digest(ref) for ref in refs]


def picture_digest(ref: str) -> str:
    """SHA-256 of a picture's bytes: a ``data:`` URI's payload, or the file a path names. A reference
    that is neither (or a file gone since the row was checked) is identified by its text."""
    if ref.startswith("data:"):
        header, _, payload = ref.partition(",")
        try:
            data = (
                base64.b64decode(payload, validate=False) if header.endswith(";base64") else unquote_to_bytes(payload)
            )
        except (binascii.Error, ValueError):
            return _named(ref)
        return hashlib.sha256(data).hexdigest()[:32]
    path = ref[len("file://") :] if ref.startswith("file://") else ref
    try:
        stat = os.stat(path)
    except OSError:
        return _named(ref)
    return _file_digest(path, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=65536)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """A file's digest, read once per process while its size and mtime stay (one picture, many rows)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return _named(path)
    return h.hexdigest()[:32]


def _named(ref: str) -> str:
    return "ref:" + hashlib.sha256(ref.encode("utf-8")).hexdigest()[:32]


def _key_turn(m: dict[str, Any]) -> list[Any]:
    """Role and text; tool parts too (prompts that differ only in a call differ), so a turn without
    them hashes as it always has."""
    tools = {k: m[k] for k in TOOL_KEYS if k in m}
    return [m["role"], m["content"].strip(), tools] if tools else [m["role"], m["content"].strip()]


def _digest(value: Any) -> str:
    return hashlib.sha1(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()[:20]
