"""Which columns hold what, and the (prompt, response) items of each row.

Three row shapes, detected from the first row's columns or named with `--columns`:
- `single`: prompt + response (one reward per row);
- `pairs`: prompt + chosen + rejected (both rewards, the margin, P(chosen > rejected)); chosen
  and rejected may also be whole conversations ending in the assistant turn (hh-rlhf,
  UltraFeedback-binarized), the prompt then being the turns before it;
- `messages`: a conversation ending with the assistant reply to score.

A prompt is text or a list of {role, content} messages (tool turns and assistant tool calls
included, laid out as training lays them out). Rows are checked by rmspec.messages (the
check data and serve use too); a row that cannot be scored raises its `Invalid`, which `reason`
words as the rejects file says it (`missing field 'response'`, `empty response`...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmspec.errors import DataError
from rmspec.messages import Invalid, Problem, Rules, conversation, field_value, split_reply, text

SINGLE, PAIRS, MESSAGES = "single", "pairs", "messages"
ROLES_OF = {SINGLE: ("prompt", "response"), PAIRS: ("prompt", "chosen", "rejected"), MESSAGES: ("messages",)}
ALIASES = {
    "prompt": ("prompt", "question", "instruction", "query"),
    "response": ("response", "completion", "answer", "output"),
    "chosen": ("chosen",),
    "rejected": ("rejected",),
    "messages": ("messages", "conversation", "conversations"),
    "steps": ("steps", "completions"),  # process reward models only (rmspec.score.steps)
}


@dataclass
class Shape:
    kind: str
    columns: dict[str, str] = field(default_factory=dict)  # role -> column name
    base_dir: str | None = None  # the scored file's folder: relative image paths resolve against it
    allow_image_urls: bool = False  # `rmspec score --allow-image-urls`: download http(s) images

    def describe(self) -> str:
        return f"{self.kind} (" + ", ".join(f"{role}={col}" for role, col in self.columns.items()) + ")"

    # ------------------------------------------------------------------ items

    def items(self, row: dict[str, Any], layout: Any = None) -> list[tuple[Any, str]]:
        """One (prompt, response) per scored text: one for single/messages, (chosen, rejected) for pairs.
        With the scorer's `layout` (rmspec.data.layout), a prompt with tool turns its chat template
        does not render is `Invalid` (TEMPLATE_DROPS_TOOLS), as training data rejects it."""
        items = self._items(row)
        if layout is not None:
            for (prompt, _), where in zip(items, self._prompt_fields()):
                if not isinstance(prompt, str):
                    layout.check_tools(prompt, where)
        return items

    def _prompt_fields(self) -> list[str]:
        c = self.columns
        if self.kind == MESSAGES:
            return [c["messages"]]
        if self.kind == SINGLE:
            return [c["prompt"]]
        return [c.get("prompt", c[side]) for side in ("chosen", "rejected")]

    def _items(self, row: dict[str, Any]) -> list[tuple[Any, str]]:
        c = self.columns
        if self.kind == MESSAGES:
            conv = conversation(field_value(row, c["messages"]), c["messages"], SCORE_MESSAGES)
            return [split_reply(conv, c["messages"])]
        if self.kind == SINGLE:
            return [(_prompt(row, c["prompt"]), text(field_value(row, c["response"]), c["response"], non_empty=True))]
        out = []
        for side in ("chosen", "rejected"):
            value = field_value(row, c[side])
            if isinstance(value, list):  # a whole conversation ending with this side's reply
                out.append(split_reply(conversation(value, c[side], SCORE_MESSAGES), c[side]))
            else:
                if "prompt" not in c:
                    raise Invalid(
                        Problem.NO_PROMPT_COLUMN,
                        c[side],
                        "is text but no prompt column was found or named",
                        c[side],
                        value=value,
                    )
                out.append((_prompt(row, c["prompt"]), text(value, c[side], non_empty=True)))
        return out


def parse_columns(text: str | None) -> dict[str, str]:
    """`prompt=question,response=answer` -> {"prompt": "question", "response": "answer"}."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        role, sep, col = part.partition("=")
        role, col = role.strip(), col.strip()
        if not sep or not col or role not in ALIASES:
            raise DataError(
                f"--columns {text}: {part!r} is not ROLE=COLUMN with ROLE one of {', '.join(ALIASES)}",
                "e.g. --columns prompt=question,response=answer or chosen=better,rejected=worse",
            )
        out[role] = col
    return out


def detect(columns: list[str], named: dict[str, str]) -> Shape:
    """The shape from the named roles, else from the column names (first match of each alias list)."""
    found = dict(named)
    for role, aliases in ALIASES.items():
        if role not in found:
            hit = next((a for a in aliases if a in columns), None)
            if hit is not None:
                found[role] = hit
    if named:  # the roles the user named decide the shape
        kinds = [k for k, roles in ROLES_OF.items() if any(r in named for r in roles if r != "prompt")]
    else:
        kinds = [k for k in (PAIRS, MESSAGES, SINGLE) if all(r in found for r in ROLES_OF[k] if r != "prompt")]
    if not kinds:
        raise DataError(
            f"cannot tell which columns to score among: {', '.join(columns) or '(none)'}",
            "name them: --columns prompt=COL,response=COL (one response), "
            "--columns prompt=COL,chosen=COL,rejected=COL (pairs) "
            "or --columns messages=COL (a conversation)",
        )
    kind = kinds[0]
    needed = [r for r in ROLES_OF[kind] if r != "prompt" or kind == SINGLE]
    missing = [r for r in needed if r not in found]
    if missing:
        raise DataError(
            f"a {kind} row needs {', '.join(needed)}; no column for {', '.join(missing)} among {', '.join(columns)}",
            f"name it: --columns {missing[0]}=COLUMN",
        )
    roles = [r for r in ROLES_OF[kind] if r in found]
    return Shape(kind, {r: found[r] for r in roles})


# ---------------------------------------------------------------------- row checks (rmspec.messages)

# A prompt is text (kept as it is) or a non-empty list of messages; conversations may hold tool
# turns and assistant tool calls, as training data may (rmspec.data.row_values.DATA_RULES).
SCORE_PROMPT = Rules(allow_text=True, tools=True)
SCORE_MESSAGES = Rules(tools=True)
MESSAGE_FORM = "{role: system|user|assistant, content: text}"  # the words users know (tool turns pass too)


def reason(exc: Invalid) -> tuple[str, str]:
    """(the reason written to the rejects file, the kind it is counted under in the summary: the
    reason without the message index or the parenthesised value)."""
    col, value = exc.column or exc.field, exc.value
    p = exc.problem
    if p == Problem.MISSING:
        return _same(f"missing field '{col}'")
    if p == Problem.NOT_TEXT:
        return f"'{col}' is not text ({type(value).__name__})", f"'{col}' is not text"
    if p == Problem.EMPTY_TEXT:
        return _same(f"empty {col}")
    if p == Problem.NOT_TEXT_OR_MESSAGES:
        kind = f"'{col}' is neither text nor a list of messages"
        return f"{kind} ({type(value).__name__})", kind
    if p in (Problem.NOT_MESSAGES, Problem.EMPTY_LIST):
        return _same(f"'{col}' is not a non-empty list of {{role, content}} messages")
    if p in (Problem.NOT_A_MESSAGE, Problem.BAD_ROLE, Problem.BAD_CONTENT, Problem.BAD_PART):
        return f"'{col}' message {exc.index} is not {MESSAGE_FORM}", f"'{col}' is not {MESSAGE_FORM}"
    if p == Problem.NO_REPLY:
        kind = f"'{col}' does not end with the assistant reply to score"
        return f"{kind} (last role: {value})", kind
    if p == Problem.NO_PROMPT:
        return _same(f"'{col}' has no prompt turn before the assistant reply")
    if p == Problem.EMPTY_REPLY:
        return f"empty response (last turn of '{col}')", "empty response"
    if p == Problem.BAD_TOOL_CALLS:
        return f"'{exc.field}' {exc.detail}", f"'{col}' has malformed tool calls"
    if p == Problem.TEMPLATE_DROPS_TOOLS:
        return f"'{exc.field}': {exc.detail}", "the chat template drops tool calls or results"
    if p == Problem.NO_PROMPT_COLUMN:
        kind = f"'{col}' is text but no prompt column was found or named"
        return f"{kind} (--columns prompt=...)", kind
    return _same(f"'{col}' {exc.detail}")  # NOT_TEXT_LIST: a step list (rmspec.score.steps)


def _same(text: str) -> tuple[str, str]:
    return text, text


def _prompt(row: dict[str, Any], column: str) -> Any:
    value = field_value(row, column)
    return value if isinstance(value, str) else conversation(value, column, SCORE_PROMPT)
