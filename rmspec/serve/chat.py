"""Chat messages as the OpenAI and vLLM protocols send them, checked (rmspec.messages, the check
data and score use too) and flattened to text; a bad one is a 422 naming the field path, as is a
tool turn the model's chat template would drop (`check_layout`)."""

from __future__ import annotations

from typing import Any

from rmspec.messages import Invalid, Message, Problem, Rules
from rmspec.messages import conversation as checked_conversation
from rmspec.messages import split_reply as checked_split_reply
from rmspec.serve.request_io import ApiError

# The OpenAI form: content may be a list of text parts; tool turns and assistant tool calls pass,
# as they do in training data and `rmspec score` (rmspec.data.row_values.DATA_RULES, score.shapes).
SERVE_RULES = Rules(text_parts=True, tools=True)


def conversation(messages: Any, field: str = "messages") -> list[Message]:
    """[{role, content}] with text content; a list of text parts is joined (the OpenAI form)."""
    try:
        return checked_conversation(messages, field, SERVE_RULES)
    except Invalid as exc:
        raise _unprocessable(exc) from None


def split_reply(conv: list[Message], field: str = "messages") -> tuple[list[Message], str]:
    """(the prompt turns, the assistant reply to score): the conversation must end with the reply."""
    try:
        return checked_split_reply(conv, field)
    except Invalid as exc:
        raise _unprocessable(exc) from None


def check_layout(layout: Any, prompt: list[Message], field: str = "messages") -> None:
    """A 422 naming the message whose tool call or result the model's chat template does not render
    (training data rejects such a row: `template_drops_tools`)."""
    try:
        layout.check_tools(prompt, field)
    except Invalid as exc:
        raise _unprocessable(exc) from None


def _unprocessable(exc: Invalid) -> ApiError:
    message = f"{exc.field}: {exc.detail}"
    # a role is the client's own value, echoed: cut to a readable length
    return ApiError(422, message[:200] if exc.problem == Problem.BAD_ROLE else message, exc.field)


# ---------------------------------------------------------------------- images (a vision reward model)

IMAGE_PART_TYPES = ("image_url", "image", "input_image")


def image_conversation(
    messages: Any, limits: Any, field: str = "messages", reserve: Any = None
) -> tuple[Any, list[Any]]:
    """OpenAI `image_url` content parts read and checked (rmspec.serve.images.read_images: the count,
    bytes and pixel budget of the request, then rmspec.vision.images' decoding, as the data stage and
    `rmspec score` check them): the messages with each image part replaced by a picture mark text part
    (rmspec.vision.marks; a `<image>` written in the text stays text; a U+FFFC in it is a 400), then
    checked as any conversation, and the decoded images in order. Only
    `data:` URIs are read, and http(s) URLs where the server allows them (--allow-image-urls); never
    a path on the server. A part that does not decode is a 400 naming the item; one over a limit a
    413 naming the flag. Blocking: the routes run it off the event loop (Service.off_loop)."""
    from rmspec.serve.images import Part, read_images
    from rmspec.vision.marks import PICTURE

    if not isinstance(messages, list):
        return messages, []
    out, found = [], []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            _no_mark(content, f"{field}.{i}.content")
            out.append(message)
            continue
        parts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES):
                _no_mark(part, f"{field}.{i}.content.{j}")
                parts.append(part)
                continue
            where = f"{field}.{i}.content.{j}"
            value = part.get(part["type"])
            url = value.get("url") if isinstance(value, dict) else value
            if not isinstance(url, str) or not url.startswith(("data:", "http://", "https://")):
                raise ApiError(
                    400,
                    f"{where}: an image must be {{'type': 'image_url', 'image_url': {{'url': 'data:image/...;base64,...'}}}}"
                    " (or an http(s) URL where the server runs with --allow-image-urls)",
                    where,
                )
            found.append(Part(where, url))
            parts.append({"type": "text", "text": PICTURE})
        out.append({**message, "content": parts})
    return out, read_images(found, limits, reserve)


def _no_mark(text: Any, where: str) -> None:
    """A 400 for a text holding U+FFFC, the character a picture's place is written as (rmspec.vision.marks)."""
    from rmspec.vision.marks import in_text

    if in_text(text):
        raise ApiError(
            400,
            f"{where}: the text holds U+FFFC (OBJECT REPLACEMENT CHARACTER), which marks a picture's place; "
            "send each picture as an image_url part and remove U+FFFC from the text",
            where,
        )
