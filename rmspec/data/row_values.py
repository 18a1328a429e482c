"""How the presets read one field of a source row: text, a number, a conversation (the one message
check of rmspec.messages, under the data's rules), a conversational pair, an hh-rlhf transcript.
A value that does not fit raises `Reject` with the reason the data report counts."""

from __future__ import annotations

import math
import re
from typing import Any

from rmspec.data.records import Reject
from rmspec.messages import Invalid, Problem, Rules, conversation, ends_with_reply, field_value
from rmspec.messages import text as checked_text

# A prompt may be text, or no messages at all; conversations may hold tool turns and tool calls
# (stored by rmspec.data.tool_store, checked against the chat template when laid out).
DATA_RULES = Rules(allow_text=True, allow_empty=True, tools=True)


def required(row: dict[str, Any], column: str) -> Any:
    """`row[column]`; absent or null is a `missing_field` reject."""
    try:
        return field_value(row, column)
    except Invalid:
        raise Reject("missing_field", f"column {column!r} is missing or null") from None


def text(value: Any, field: str) -> str:
    try:
        return checked_text(value, field)
    except Invalid:
        raise Reject("wrong_type", f"{field} must be text, got {type(value).__name__}") from None


def number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise Reject("wrong_type", f"{field} must be a number, got {value!r}") from None
        else:
            raise Reject("wrong_type", f"{field} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise Reject("wrong_type", f"{field} must be a finite number, got {value!r}")
    return float(value)


def messages(value: Any, field: str, need_last_assistant: bool = False) -> list[dict[str, str]]:
    """Text becomes one user turn; a list (maybe empty) must hold {role, content} with known
    roles (rmspec.messages, the check score and serve use too)."""
    try:
        out = conversation(value, field, DATA_RULES)
        return ends_with_reply(out, field) if need_last_assistant else out
    except Invalid as exc:
        if exc.problem == Problem.NOT_TEXT_OR_MESSAGES:
            raise Reject(
                "wrong_type", f"{field} must be text or a list of messages, got {type(value).__name__}"
            ) from None
        if exc.problem == Problem.BAD_TOOL_CALLS:
            raise Reject("bad_tool_calls", f"{exc.field}: {exc.detail}") from None
        if exc.problem == Problem.NO_REPLY:
            raise Reject("malformed", f"{field} must end with an assistant message (the turn to learn)") from None
        raise Reject(
            "wrong_type",
            f"{field}[{exc.index}] must be {{role: system|user|assistant, content: text}}, got {str(exc.value)[:80]}",
        ) from None


def conversation_pair(chosen: Any, rejected: Any, prompt: Any) -> tuple[list[dict[str, str]], str, str]:
    """Conversational pairs: either full conversations (the prompt is all but the last message) or
    completions only, with the prompt in its own column (TRL's explicit-prompt format)."""
    c = messages(chosen, "chosen")
    r = messages(rejected, "rejected")
    if not c or not r or c[-1]["role"] != "assistant" or r[-1]["role"] != "assistant":
        raise Reject("malformed", "chosen and rejected must each end with an assistant message")
    for side, conv in (("chosen", c), ("rejected", r)):
        if conv[-1].get("tool_calls"):  # the scored reply is text: its calls would vanish without a word
            raise Reject("bad_tool_calls", f"{side}.{len(conv) - 1}.tool_calls: the reply to score must be text")
    if len(c) == 1 and len(r) == 1:
        if prompt is None:
            raise Reject("missing_field", "completions without their conversation need a prompt column")
        prompt_msgs = messages(prompt, "prompt")
    else:
        prompt_msgs = c[:-1]
        if [_turn(m) for m in r[:-1]] != [_turn(m) for m in prompt_msgs]:
            raise Reject("malformed", "chosen and rejected conversations differ before the last message")
    return prompt_msgs, c[-1]["content"], r[-1]["content"]


def _turn(m: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two prompt turns the same: role, text and any tool parts."""
    return (m["role"], m["content"].strip(), *(m.get(k) for k in ("tool_calls", "name", "tool_call_id")))


HH_ASSISTANT = "\n\nAssistant:"
HH_TURN = re.compile(r"\n\n(Human|Assistant):[ ]?")


def split_hh(transcript: str, field: str) -> tuple[str, str]:
    """hh-rlhf: the prompt is everything up to the last "\\n\\nAssistant:", the response the rest."""
    cut = transcript.rfind(HH_ASSISTANT)
    if cut < 0 or "\n\nHuman:" not in transcript[:cut]:
        raise Reject("malformed", f"{field} has no '\\n\\nHuman:' turn followed by a '\\n\\nAssistant:' turn")
    return transcript[:cut], transcript[cut + len(HH_ASSISTANT) :].lstrip(" ")


def hh_turns(prefix: str) -> list[dict[str, str]]:
    """The shared prefix as chat turns (Human -> user, Assistant -> assistant)."""
    parts = HH_TURN.split(prefix)
    turns = []
    # parts: [before-first-marker, role, text, role, text, ...]
    for role, content in zip(parts[1::2], parts[2::2]):
        turns.append({"role": "user" if role == "Human" else "assistant", "content": content.strip()})
    return turns
