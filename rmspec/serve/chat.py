"""Chat messages as the OpenAI and vLLM protocols send them, checked and flattened to text."""

from __future__ import annotations

from typing import Any

from rmspec.serve.request_io import ApiError

ROLES = ("system", "user", "assistant")


def conversation(messages: Any, field: str = "messages") -> list[dict[str, str]]:
    """[{role, content}] with text content; a list of text parts is joined (the OpenAI form)."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(422, f"{field}: expected a non-empty list of {{role, content}} messages", field)
    out = []
    for i, m in enumerate(messages):
        where = f"{field}.{i}"
        if not isinstance(m, dict):
            raise ApiError(422, f"{where}: expected an object with role and content", where)
        role = m.get("role")
        if role not in ROLES:
            raise ApiError(422, f"{where}.role: expected one of {', '.join(ROLES)}, got {role!r}"[:200], f"{where}.role")
        out.append({"role": role, "content": _text(m.get("content"), f"{where}.content")})
    return out


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise ApiError(422, f"{where}.{j}: only text parts ({{\"type\": \"text\", \"text\": ...}}) can be scored", f"{where}.{j}")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(422, f"{where}: expected a string or a list of text parts", where)


def split_reply(conv: list[dict[str, str]], field: str = "messages") -> tuple[list[dict[str, str]], str]:
    """(the prompt turns, the assistant reply to score): the conversation must end with the reply."""
    if conv[-1]["role"] != "assistant":
        last = f"{field}.{len(conv) - 1}.role"
        raise ApiError(422, f"{last}: the last message must be the assistant reply to score, got {conv[-1]['role']!r}", last)
    if len(conv) < 2:
        raise ApiError(422, f"{field}: give the prompt turns before the assistant reply", field)
    if not conv[-1]["content"].strip():
        raise ApiError(422, f"{field}.{len(conv) - 1}.content: the reply to score is empty", f"{field}.{len(conv) - 1}.content")
    return conv[:-1], conv[-1]["content"]
