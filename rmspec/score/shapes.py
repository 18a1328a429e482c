"""Which columns hold what, and the (prompt, response) items of each row.

Three row shapes, detected from the first row's columns or named with `--columns`:
- `single`: prompt + response (one reward per row);
- `pairs`: prompt + chosen + rejected (both rewards, the margin, P(chosen > rejected)); chosen
  and rejected may also be whole conversations ending in the assistant turn (hh-rlhf,
  UltraFeedback-binarized), the prompt then being the turns before it;
- `messages`: a conversation ending with the assistant reply to score.

A prompt is text or a list of {role, content} messages. A row that cannot be scored gets a reason
(`missing field 'response'`, `empty response`...) and goes to the rejects file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmspec.errors import DataError

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


class Reject(Exception):
    """This row cannot be scored; the message is the reason written to the rejects file."""


@dataclass
class Shape:
    kind: str
    columns: dict[str, str] = field(default_factory=dict)  # role -> column name

    def describe(self) -> str:
        return f"{self.kind} (" + ", ".join(f"{role}={col}" for role, col in self.columns.items()) + ")"

    # ------------------------------------------------------------------ items

    def items(self, row: dict[str, Any]) -> list[tuple[Any, str]]:
        """One (prompt, response) per scored text: one for single/messages, (chosen, rejected) for pairs."""
        c = self.columns
        if self.kind == MESSAGES:
            return [_split(_conversation(_get(row, c["messages"]), c["messages"]), c["messages"])]
        if self.kind == SINGLE:
            return [(_prompt(_get(row, c["prompt"]), c["prompt"]), _response(_get(row, c["response"]), c["response"]))]
        out = []
        for side in ("chosen", "rejected"):
            value = _get(row, c[side])
            if isinstance(value, list):  # a whole conversation ending with this side's reply
                out.append(_split(_conversation(value, c[side]), c[side]))
            else:
                if "prompt" not in c:
                    raise Reject(f"'{c[side]}' is text but no prompt column was found or named (--columns prompt=...)")
                out.append((_prompt(_get(row, c["prompt"]), c["prompt"]), _response(value, c[side])))
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
            raise DataError(f"--columns {text}: {part!r} is not ROLE=COLUMN with ROLE one of {', '.join(ALIASES)}",
                            "e.g. --columns prompt=question,response=answer or chosen=better,rejected=worse")
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
        raise DataError(f"cannot tell which columns to score among: {', '.join(columns) or '(none)'}",
                        "name them: --columns prompt=COL,response=COL (one response), "
                        "--columns prompt=COL,chosen=COL,rejected=COL (pairs) or --columns messages=COL (a conversation)")
    kind = kinds[0]
    needed = [r for r in ROLES_OF[kind] if r != "prompt" or kind == SINGLE]
    missing = [r for r in needed if r not in found]
    if missing:
        raise DataError(f"a {kind} row needs {', '.join(needed)}; no column for {', '.join(missing)} among {', '.join(columns)}",
                        f"name it: --columns {missing[0]}=COLUMN")
    roles = [r for r in ROLES_OF[kind] if r in found]
    return Shape(kind, {r: found[r] for r in roles})


# ---------------------------------------------------------------------- row checks


def _get(row: dict[str, Any], column: str) -> Any:
    if column not in row or row[column] is None:
        raise Reject(f"missing field '{column}'")
    return row[column]


def _response(value: Any, column: str) -> str:
    if not isinstance(value, str):
        raise Reject(f"'{column}' is not text ({type(value).__name__})")
    if not value.strip():
        raise Reject(f"empty {column}")
    return value


def _prompt(value: Any, column: str) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        conv = _conversation(value, column)
        return conv
    raise Reject(f"'{column}' is neither text nor a list of messages ({type(value).__name__})")


def _conversation(value: Any, column: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise Reject(f"'{column}' is not a non-empty list of {{role, content}} messages")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") or not isinstance(m.get("content"), str):
            raise Reject(f"'{column}' message {i} is not {{role: system|user|assistant, content: text}}")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _split(conv: list[dict[str, str]], column: str) -> tuple[list[dict[str, str]], str]:
    if conv[-1]["role"] != "assistant":
        raise Reject(f"'{column}' does not end with the assistant reply to score (last role: {conv[-1]['role']})")
    if len(conv) < 2:
        raise Reject(f"'{column}' has no prompt turn before the assistant reply")
    if not conv[-1]["content"].strip():
        raise Reject(f"empty response (last turn of '{column}')")
    return conv[:-1], conv[-1]["content"]
