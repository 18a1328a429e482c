"""The one check of chat messages and of a row's text fields, for data, score and serve.

`conversation(value, field, rules)` turns a value into `[{role, content}]` or raises `Invalid`
with a `Problem` (what is wrong), the field path (`messages.1.content`) and a default detail;
`split_reply` takes the assistant reply to score off the end. Each caller maps `Invalid` to its
own outcome and words, which users and tests already know:

- data (rmspec.data.presets): a rejected row with reason `wrong_type`, `malformed`, `missing_field`,
  `bad_tool_calls` (and `template_drops_tools` when the layout renders, rmspec.data.tool_store);
- score (rmspec.score.shapes): a rejects-file row with its reason (a whole-file problem exits 2);
- serve (rmspec.serve.chat): HTTP 422 naming the field path.

What differs between them is stated in `Rules` (one flag each), not in three copies of the loop.
Light: no torch, no pydantic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

ROLES = ("system", "user", "assistant")
TOOL_ROLES = (*ROLES, "tool")  # where `Rules.tools`: tool results, and tool calls on assistant turns
TEXT_PARTS_ONLY = 'only text parts ({"type": "text", "text": ...}) can be scored'
Message = dict[str, str]


class Problem(str, Enum):
    MISSING = "missing"  # the field is absent or null
    NOT_TEXT = "not_text"  # a text field holds something else
    EMPTY_TEXT = "empty_text"  # a text field that must say something is blank
    NOT_TEXT_OR_MESSAGES = "not_text_or_messages"  # where text is allowed: neither text nor a list
    NOT_MESSAGES = "not_messages"  # where text is not allowed: not a list of messages
    NOT_TEXT_LIST = "not_text_list"  # not a non-empty list of non-blank texts (a solution's steps)
    NO_PROMPT_COLUMN = "no_prompt_column"  # a text reply, but no column holds its prompt
    EMPTY_LIST = "empty_list"  # an empty list where messages are needed
    NOT_A_MESSAGE = "not_a_message"  # a list item that is not an object
    BAD_ROLE = "bad_role"  # role not one of ROLES
    BAD_CONTENT = "bad_content"  # content neither text nor (where allowed) a list of text parts
    BAD_PART = "bad_part"  # a content part that is not {"type": "text", "text": ...}
    NO_REPLY = "no_reply"  # the conversation does not end with the assistant reply
    NO_PROMPT = "no_prompt"  # only the reply, no turn before it
    EMPTY_REPLY = "empty_reply"  # the reply to score is blank
    BAD_TOOL_CALLS = "bad_tool_calls"  # tool_calls not [{"type": "function", "function": {name, arguments}}]
    TEMPLATE_DROPS_TOOLS = "template_drops_tools"  # the chat template rendered without a tool call or result

    __str__ = str.__str__


@dataclass
class Invalid(ValueError):
    """A value that does not fit: what (`problem`), where (`field`: the column, then `.index`
    and `.role`/`.content`/`.content.j` inside a conversation) and a default detail. `column`,
    `index` and `value` (the offending item) let each caller word it as it always has."""

    problem: Problem
    field: str
    detail: str
    column: str = ""
    index: int | None = None
    value: Any = None

    def __post_init__(self) -> None:
        super().__init__(f"{self.field}: {self.detail}")

    def __str__(self) -> str:
        return f"{self.field}: {self.detail}"


@dataclass(frozen=True)
class Rules:
    """Where the callers' rules differ (each flag keeps what that caller accepted before):

    - `allow_text`: a bare string is one user turn (data prompts);
    - `allow_empty`: an empty list is no messages (a data prompt may have none);
    - `text_parts`: content may be a list of OpenAI text parts, joined (serve only);
    - `tools`: `tool` messages (text content, optional `name`, `tool_call_id`) and assistant `tool_calls` in the
      OpenAI/transformers shape pass through, for a chat template that renders them (the layout
      checks that it did: `missing_tool_texts`). Off, they are refused as before.
    """

    allow_text: bool = False
    allow_empty: bool = False
    text_parts: bool = False
    tools: bool = False


STRICT = Rules()


def field_value(row: dict[str, Any], column: str) -> Any:
    """`row[column]`; absent or null is `Problem.MISSING`."""
    value = row.get(column)
    if value is None:
        raise Invalid(Problem.MISSING, column, "is missing or null", column)
    return value


def text(value: Any, field: str, *, non_empty: bool = False) -> str:
    """A text field (a response, a chosen/rejected side); `non_empty`: blank is `EMPTY_TEXT`."""
    if not isinstance(value, str):
        raise Invalid(Problem.NOT_TEXT, field, f"must be text, got {type(value).__name__}", field, value=value)
    if non_empty and not value.strip():
        raise Invalid(Problem.EMPTY_TEXT, field, "is empty", field, value=value)
    return value


def text_list(value: Any, field: str) -> list[str]:
    """A non-empty list of non-blank texts (the steps of a solution)."""
    if not isinstance(value, list) or not value or not all(isinstance(s, str) and s.strip() for s in value):
        raise Invalid(Problem.NOT_TEXT_LIST, field, "must be a non-empty list of non-empty texts", field, value=value)
    return value


def conversation(value: Any, field: str, rules: Rules = STRICT) -> list[Message]:
    """`[{role, content}]` with text content, roles among ROLES; see `Rules` for what else passes."""
    if isinstance(value, str) and rules.allow_text:
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        if rules.allow_text:
            raise Invalid(
                Problem.NOT_TEXT_OR_MESSAGES,
                field,
                "expected text or a list of {role, content} messages",
                field,
                value=value,
            )
        expected = "a list" if rules.allow_empty else "a non-empty list"
        raise Invalid(
            Problem.NOT_MESSAGES, field, f"expected {expected} of {{role, content}} messages", field, value=value
        )
    if not value and not rules.allow_empty:
        raise Invalid(
            Problem.EMPTY_LIST, field, "expected a non-empty list of {role, content} messages", field, value=value
        )
    out = []
    for i, m in enumerate(value):
        where = f"{field}.{i}"
        if not isinstance(m, dict):
            raise Invalid(Problem.NOT_A_MESSAGE, where, "expected an object with role and content", field, i, m)
        roles = TOOL_ROLES if rules.tools else ROLES
        if m.get("role") not in roles:
            got = f"expected one of {', '.join(roles)}, got {m.get('role')!r}"
            raise Invalid(Problem.BAD_ROLE, f"{where}.role", got, field, i, m)
        calls = m.get("tool_calls") if rules.tools and m["role"] == "assistant" else None
        if calls is not None and m.get("content") is None:
            m = {**m, "content": ""}  # a turn that only calls tools has no text
        msg: dict[str, Any] = {"role": m["role"], "content": _content(m, f"{where}.content", rules, field, i)}
        if calls is not None:
            msg["tool_calls"] = _tool_calls(calls, f"{where}.tool_calls", field, i, m)
        if rules.tools and m["role"] == "tool":
            for key in TOOL_RESULT_KEYS:  # optional: which call this answers (templates may print them)
                if m.get(key) is not None:
                    msg[key] = text(m[key], f"{where}.{key}")
        out.append(msg)
    return out


TOOL_RESULT_KEYS = ("name", "tool_call_id")


def for_template(conv: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as chat templates take it: a tool call's `arguments` given as JSON text of an
    object (the OpenAI form) becomes that object. transformers' tool templates expect an object
    (Qwen2.5's writes `arguments | tojson`, which would print JSON text as an escaped string), and vLLM
    does the same before rendering (vllm/entrypoints/chat_utils.py `_postprocess_messages`), so a
    conversation renders here as it renders there. Anything else is left as it is."""
    if not has_tools(conv):
        return conv
    out = []
    for m in conv:
        calls = m.get("tool_calls")
        if calls:
            m = {**m, "tool_calls": [_arguments_as_object(c) for c in calls]}
        out.append(m)
    return out


def _arguments_as_object(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    args = fn.get("arguments")
    if not isinstance(args, str):
        return call
    try:
        parsed = json.loads(args)
    except ValueError:
        return call
    return {**call, "function": {**fn, "arguments": parsed}} if isinstance(parsed, dict) else call


def has_tools(conv: list[dict[str, Any]]) -> bool:
    """Whether a checked conversation holds a tool turn or a tool call (what a template may drop)."""
    return any(m["role"] == "tool" or m.get("tool_calls") for m in conv)


def _tool_calls(calls: Any, where: str, column: str, index: int, m: Any) -> list[dict[str, Any]]:
    """OpenAI/transformers tool calls: `[{"type": "function", "function": {"name", "arguments"}}]`,
    arguments an object (or its JSON text, which transformers' templates also take)."""
    if not isinstance(calls, list) or not calls:
        raise Invalid(Problem.BAD_TOOL_CALLS, where, "expected a non-empty list of tool calls", column, index, m)
    out = []
    for j, call in enumerate(calls):
        fn: Any = call.get("function") if isinstance(call, dict) else None
        ok = (
            isinstance(fn, dict)
            and call.get("type", "function") == "function"
            and isinstance(fn.get("name"), str)
            and fn["name"].strip()
            and isinstance(fn.get("arguments", {}), dict | str)
        )
        if not ok:
            raise Invalid(
                Problem.BAD_TOOL_CALLS,
                f"{where}.{j}",
                'expected {"type": "function", "function": {"name": text, "arguments": object}}',
                column,
                index,
                m,
            )
        kept: dict[str, Any] = {
            "type": "function",
            "function": {"name": fn["name"], "arguments": fn.get("arguments", {})},
        }
        if isinstance(call.get("id"), str):  # the id a tool turn's tool_call_id refers to
            kept["id"] = call["id"]
        out.append(kept)
    return out


def missing_tool_texts(conv: list[dict[str, Any]], rendered: str) -> list[tuple[str, str]]:
    """(field path, what) for each tool call name/argument value and tool result the rendering lacks:
    a template without tool support drops them silently, which must be a located reject."""
    missing = []
    for i, m in enumerate(for_template(conv)):  # what the template was given
        for j, call in enumerate(m.get("tool_calls") or []):
            fn = call["function"]
            args = fn["arguments"]
            # templates write arguments with tojson: a text value appears as itself, others as JSON
            values = (
                [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in args.values()]
                if isinstance(args, dict)
                else [args]
            )
            for what in [fn["name"], *values]:
                if what not in rendered:
                    missing.append((f"{i}.tool_calls.{j}", what))
        if m["role"] == "tool" and m["content"] not in rendered:
            missing.append((f"{i}.content", m["content"]))
    return missing


def _content(m: dict[str, Any], where: str, rules: Rules, column: str, index: int) -> str:
    content = m.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and rules.text_parts:
        parts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise Invalid(Problem.BAD_PART, f"{where}.{j}", TEXT_PARTS_ONLY, column, index, m)
            parts.append(part["text"])
        return "".join(parts)
    expected = "a string or a list of text parts" if rules.text_parts else "text"
    raise Invalid(Problem.BAD_CONTENT, where, f"expected {expected}", column, index, m)


def split_reply(conv: list[Message], field: str) -> tuple[list[Message], str]:
    """(the prompt turns, the assistant reply to score): the conversation ends with a non-blank
    assistant reply and has at least one turn before it."""
    last = len(conv) - 1
    if not conv or conv[-1]["role"] != "assistant":
        role = conv[-1]["role"] if conv else None
        raise Invalid(
            Problem.NO_REPLY,
            f"{field}.{last}.role" if conv else field,
            f"the last message must be the assistant reply to score, got {role!r}",
            field,
            last,
            role,
        )
    if conv[-1].get("tool_calls"):  # its calls would be dropped from the scored text without a word
        raise Invalid(
            Problem.BAD_TOOL_CALLS,
            f"{field}.{last}.tool_calls",
            "the reply to score is text; a last assistant turn that calls tools cannot be scored",
            field,
            last,
        )
    if len(conv) < 2:
        raise Invalid(Problem.NO_PROMPT, field, "give the prompt turns before the assistant reply", field)
    if not conv[-1]["content"].strip():
        raise Invalid(Problem.EMPTY_REPLY, f"{field}.{last}.content", "the reply to score is empty", field, last)
    return conv[:-1], conv[-1]["content"]


def ends_with_reply(conv: list[Message], field: str) -> list[Message]:
    """A conversation to learn from (generative data): its last turn is the assistant's. Unlike
    `split_reply`, a lone or blank reply passes here (data's filters judge emptiness)."""
    if not conv or conv[-1]["role"] != "assistant":
        raise Invalid(Problem.NO_REPLY, field, "must end with an assistant message", field)
    return conv
