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
