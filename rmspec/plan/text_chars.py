"""How long a row's text is for the plan's length estimate, in characters (light: plain Python)."""

from __future__ import annotations


def text_chars(value: object) -> int | None:
    """Characters of a text, or of a prompt given as messages (their text and text parts: an image part
    counts nothing here, its visual tokens are added by the plan's images step); None for anything else."""
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        return None
    total = 0
    for message in value:
        content = message.get("content")
        parts = [content] if isinstance(content, str) else content if isinstance(content, list) else None
        if parts is None:
            return None
        for part in parts:
            if isinstance(part, str):
                total += len(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                total += len(part["text"])
    return total
