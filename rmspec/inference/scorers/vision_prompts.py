"""A vision reward model's conversations: how image parts become the data stage's picture marks
(`placeholders`), how given images fill a prompt's parts (`with_image_parts`), how a (prompt, reply) item is
sent to an engine that renders and resizes itself (`openai_messages`: vLLM), and the refusal of one too long
for such an engine (`WholeTooLong`). The scorer kind that reads them is rmspec.inference.scorers.vision_reward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

IMAGE_TYPES = ("image", "image_url", "input_image")


class WholeTooLong(ValueError):
    """A conversation longer than the model's max_length, on an engine that scores it whole (vLLM)."""

    def __init__(self, length: int, limit: int):
        super().__init__(
            f"messages: the conversation is {length} tokens with its pictures' visual tokens, over the model's "
            f"max_length ({limit}); the vLLM engine scores whole conversations (`rmspec serve --engine torch` "
            "cuts it as training did), so shorten it or send smaller pictures"
        )
        self.length, self.limit = length, limit


def placeholders(prompt: Any) -> tuple[Any, list[Any]]:
    """The prompt with each image part as the data stage's picture mark (text content, as training data
    holds it) and its images in order, checked (a decoded image passes as it is)."""
    from rmspec.vision.images import decode_image
    from rmspec.vision.marks import PICTURE

    if isinstance(prompt, str):
        return prompt, []
    messages: list[dict[str, Any]] = [dict(m) for m in prompt]
    images: list[Any] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            pieces = []
            for part in content:
                if isinstance(part, Mapping) and part.get("type") in IMAGE_TYPES:
                    images.append(decode_image(part.get("image")))
                    pieces.append(PICTURE)
                elif isinstance(part, Mapping) and part.get("type") == "text":
                    pieces.append(str(part.get("text", "")))
            message["content"] = "".join(pieces)
    return messages, images


def openai_messages(prompt: Any, reply: str) -> list[dict[str, Any]]:
    """A (prompt, reply) item as an OpenAI client sends it: each image part an `image_url` whose `data:` URI
    holds the decoded picture (rmspec.vision.images.sendable_uri: the request's own bytes where they decode to the
    same pixels, else a lossless PNG), the reply the last, assistant message."""
    from rmspec.vision.images import decode_image, sendable_uri

    messages: list[dict[str, Any]] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    )
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [
                {"type": "image_url", "image_url": {"url": sendable_uri(decode_image(part.get("image")))}}
                if isinstance(part, Mapping) and part.get("type") in IMAGE_TYPES
                else dict(part)
                for part in content
            ]
    return [*messages, {"role": "assistant", "content": reply}]


def with_image_parts(prompt: Any, images: Sequence[Any], placeholder: str | None = None) -> Any:
    """A prompt whose picture marks (rmspec.vision.marks.PICTURE, as the data stage and rmspec.serve.chat
    write them) or payload-less ``{"type": "image"}`` parts take the given images, in order."""
    from rmspec.vision.marks import PICTURE
    from rmspec.vision.rows import to_parts

    placeholder = placeholder or PICTURE
    messages: list[dict[str, Any]] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    )
    queue = list(images)
    for message in messages:
        content: Any = message.get("content")
        if isinstance(content, str) and placeholder in content:
            content = to_parts(content, placeholder)
        if isinstance(content, list):
            parts = []
            for part in content:
                if isinstance(part, Mapping) and part.get("type") in IMAGE_TYPES and "image" not in part and queue:
                    part = {"type": "image", "image": queue.pop(0)}
                parts.append(dict(part))
            message["content"] = parts
    return messages
