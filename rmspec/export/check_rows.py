"""The rows `rmspec export --to vllm --check` sends to vLLM and to `rmspec score`.

By default, the run's own held-out rows: the validation split its data stage wrote to the run's cache
(RUN/cache/<data_report.json's fingerprint>/validation, a `datasets` save_to_disk folder; the
evaluation at the end of the run reads the same folder). Each pair gives two rows (its chosen and its
rejected response, after the conversation as written, `prompt_messages`), taken from pairs spread
evenly over the split, up to `--check-limit` rows. A single-turn prompt is sent to `rmspec score` as
text on every other pair and as a message list on the others, so both prompt forms users write are
compared (rmspec reads a text prompt as one user turn).

`--check-rows FILE` names other rows; a bare model folder (no run) gets the built-in conversations.
A run whose split cannot be found (no validation split, or a source the cache does not keep) is an
RmspecError (exit 2) that names `--check-rows`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rmspec.errors import RmspecError
from rmspec.export.vllm_hosting import PROBE_ROWS

DEFAULT_LIMIT = 32
ROWS_HINT = (
    'pass --check-rows FILE (JSONL rows {"prompt": ..., "response": ...} or {"messages": [..., {"role": '
    '"assistant", ...}]})'
)
# Conversations for a bare model folder (no run, so no held-out split): single-turn, multi-turn with a
# system turn, numbers and punctuation.
BUILT_IN: list[tuple[list[dict[str, str]], str]] = [
    *PROBE_ROWS,
    ([{"role": "user", "content": "Add 2 and 2."}], "4"),
    ([{"role": "user", "content": "Name a colour."}], "I would rather not say."),
    (
        [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hello?"}],
        "Bonjour ! Comment puis-je aider ?",
    ),
    (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye?"},
        ],
        "goodbye",
    ),
]


@dataclass(frozen=True)
class CheckRow:
    """One scored text: the conversation before the response, the response, and where it came from."""

    messages: list[dict[str, str]]
    response: str
    id: str = ""  # the split's row id ("" for built-in rows)
    side: str = ""  # chosen / rejected for a pair
    text_prompt: bool = False  # sent to `rmspec score` as a text prompt (a single user turn)

    def score_row(self) -> dict[str, Any]:
        """The row as `rmspec score` reads it (prompt + response)."""
        prompt: Any = self.messages[0]["content"] if self.text_prompt else self.messages
        return {"prompt": prompt, "response": self.response}

    def described(self) -> dict[str, str]:
        return {"id": self.id, "side": self.side, "prompt": "text" if self.text_prompt else "messages"}


@dataclass(frozen=True)
class CheckRows:
    rows: list[CheckRow]
    source: str  # what the report says the rows are

    def report(self) -> dict[str, Any]:
        return {
            "rows": len(self.rows),
            "rows_source": self.source,
            "text_prompts": sum(r.text_prompt for r in self.rows),
            "message_prompts": sum(not r.text_prompt for r in self.rows),
            "rows_used": [r.described() for r in self.rows],
        }


def is_run(path: Path) -> bool:
    return path.is_dir() and (path / "spec.yaml").is_file()


def check_rows(target: Path, rows_file: Path | None, limit: int = DEFAULT_LIMIT) -> CheckRows:
    """The rows to compare: --check-rows FILE, else the run's held-out split, else (a bare model
    folder) the built-in conversations."""
    if limit < 1:
        raise RmspecError(f"--check-limit {limit}: must be at least 1", "give the number of rows to compare, e.g. 32")
    if rows_file is not None:
        rows = read_rows_file(rows_file)[:limit]
        return CheckRows(rows, f"{rows_file} (first {len(rows)} rows)")
    if is_run(target):
        return held_out_rows(target, limit)
    rows = [CheckRow(m, r, id=f"built-in-{i}") for i, (m, r) in enumerate(BUILT_IN)][:limit]
    return CheckRows(rows, f"{len(rows)} built-in conversations ({target} is a model folder, not a run)")


def validation_folder(run: Path) -> Path:
    """RUN/cache/<fingerprint>/validation: the held-out split the run's data stage wrote."""
    report = run / "data_report.json"
    try:
        fingerprint = json.loads(report.read_text(encoding="utf-8")).get("fingerprint") or ""
    except (OSError, ValueError):
        raise RmspecError(f"{run}: no readable data_report.json, so the held-out split is unknown", ROWS_HINT) from None
    if not fingerprint:
        raise RmspecError(
            f"{run}: its data was not cached (a source without a stable identity: a live database or an "
            "unpinned stream), so the held-out split is not in the run",
            ROWS_HINT,
        )
    folder = run / "cache" / fingerprint / "validation"
    if not folder.is_dir():
        has_cache = (run / "cache" / fingerprint / "train").is_dir()
        why = (
            "the run has no validation split (data.split.validation_fraction 0 and no validation_source)"
            if has_cache
            else f"{folder.parent} is missing (the run's data cache was removed)"
        )
        raise RmspecError(f"{run}: no held-out rows to check: {why}", ROWS_HINT)
    return folder


def spread(n: int, k: int) -> list[int]:
    """k indices spread evenly over range(n) (all of them when k >= n), in order."""
    if k >= n:
        return list(range(n))
    return [i * n // k for i in range(k)]


def held_out_rows(run: Path, limit: int) -> CheckRows:
    """Both responses of pairs spread evenly over the run's validation split, up to `limit` rows."""
    import datasets

    folder = validation_folder(run)
    split = datasets.load_from_disk(str(folder))
    if "prompt_messages" not in split.column_names:
        raise RmspecError(
            f"{folder}: the split keeps no conversation as written (prompt_messages): its rows are not pairs",
            ROWS_HINT,
        )
    sides = [s for s in ("chosen", "rejected") if s in split.column_names] or ["response"]
    images = split["images"] if "images" in split.column_names else [None] * len(split)
    indices = [i for i, refs in enumerate(images) if not refs]  # a row with images is a VLM's: not exported
    picked = spread(len(indices), -(-limit // len(sides)))
    rows: list[CheckRow] = []
    for n, index in enumerate(indices[i] for i in picked):
        record = split[index]
        messages = [{"role": m["role"], "content": m["content"]} for m in record["prompt_messages"]]
        single_turn = len(messages) == 1 and messages[0]["role"] == "user"
        for side in sides:
            text = single_turn and n % 2 == 0  # every other pair as a text prompt: both forms compared
            rows.append(CheckRow(messages, record[side], id=str(record.get("id", index)), side=side, text_prompt=text))
    rows = rows[:limit]
    if not rows:
        raise RmspecError(f"{run}: the validation split ({folder}) has no rows", ROWS_HINT)
    return CheckRows(rows, f"the run's validation split ({folder}): {len(rows)} rows of {len(split)} pairs")


Row = TypeVar("Row")


def read_jsonl_rows(
    path: Path, build: Callable[[dict, int], Row], *, what: str, hint: str, empty_hint: str
) -> list[Row]:
    """Each non-empty line of a --check-rows file, parsed and built into a row by ``build(row, line)``; a line
    that does not parse or build (ValueError, KeyError, TypeError, StopIteration) stops at path:line with why."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(build(json.loads(line), n))
        except (ValueError, KeyError, TypeError, StopIteration) as exc:
            raise RmspecError(f"{path}:{n}: not {what} ({exc or 'a column is missing'})", hint) from None
    if not rows:
        raise RmspecError(f"{path}: no rows", empty_hint)
    return rows


def _check_row(row: dict, n: int) -> CheckRow:
    if "messages" in row:
        *messages, last = row["messages"]
        if last["role"] != "assistant" or not messages:
            raise ValueError("messages must end with the assistant reply")
        return CheckRow(messages, last["content"], id=str(row.get("id", n)))
    prompt = row["prompt"]
    text = isinstance(prompt, str)
    messages = [{"role": "user", "content": prompt}] if text else prompt
    return CheckRow(messages, row["response"], id=str(row.get("id", n)), text_prompt=text)


def read_rows_file(path: Path) -> list[CheckRow]:
    """--check-rows: `rmspec score`'s shapes `prompt` + `response` or `messages` ending with the reply."""
    return read_jsonl_rows(
        path,
        _check_row,
        what="a check row",
        hint='write JSONL rows {"prompt": ..., "response": ...} or {"messages": [..., {"role": "assistant", ...}]}',
        empty_hint="give at least one conversation",
    )
