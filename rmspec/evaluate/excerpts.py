"""A prompt as the per-example rows keep it: its text (the last user turn of a conversation), cut to
LIMIT characters, so the report can show the pairs a model misranks without the data at hand."""

from __future__ import annotations

from typing import Any

LIMIT = 500  # characters kept per row: enough to recognise the prompt, small beside the scores


def prompt_excerpt(prompt: Any) -> str:
    if isinstance(prompt, list):  # chat messages: the last user turn says what was asked
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else " ".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    if isinstance(prompt, list):  # content parts (a prompt with images): its text parts
        prompt = " ".join(str(p.get("text", "")) for p in prompt if isinstance(p, dict) and p.get("type") == "text")
    text = " ".join(str(prompt or "").split())
    return text if len(text) <= LIMIT else text[: LIMIT - 1] + "…"
