"""The rows `rmspec export --to vllm --check` scores for a process reward model: a prompt and its steps.

By default, the run's held-out rows: its validation split (rmspec.export.check_rows.validation_folder), rows
spread evenly over it up to `--check-limit`, each with its conversation as written (`prompt_messages`) and
its steps; a single-turn prompt goes to `rmspec score` as text on every other row, so both prompt forms are
compared. `--check-rows FILE` names other rows (`rmspec score`'s process shapes: `problem`/`prompt`/
`question`/`query` and `steps`/`completions`); a bare model folder gets the built-in rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.export.check_rows import is_run, read_jsonl_rows, spread, validation_folder

STEP_ROWS_HINT = (
    'pass --check-rows FILE (JSONL rows {"prompt": text or messages, "steps": [text, ...]}, the shape '
    "`rmspec score` reads for a process reward model)"
)
PROMPT_COLUMNS = ("problem", "prompt", "question", "query")  # as rmspec.inference.scorers.process reads them
STEP_COLUMNS = ("steps", "completions")
BUILT_IN_STEPS: list[tuple[list[dict[str, str]], list[str]]] = [
    ([{"role": "user", "content": "What is 7 + 5?"}], ["Add 7 and 5.", "7 + 5 = 12.", "The answer is 12."]),
    ([{"role": "user", "content": "What is 9 - 4?"}], ["9 - 4 = 6.", "The answer is 6."]),
    (
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Double 21, then add 1."}],
        ["21 * 2 = 42.", "42 + 1 = 43.", "The answer is 43."],
    ),
    ([{"role": "user", "content": "Name three colours."}], ["Red.", "Green.", "Blue, and that is three."]),
]


@dataclass(frozen=True)
class StepCheckRow:
    """One process row: the conversation before the steps, the steps, and where it came from."""

    messages: list[dict[str, str]]
    steps: list[str]
    id: str = ""
    text_prompt: bool = False  # sent to `rmspec score` as a text prompt (a single user turn)

    @property
    def prompt(self) -> Any:
        return self.messages[0]["content"] if self.text_prompt else self.messages

    def score_row(self) -> dict[str, Any]:
        """The row as `rmspec score` reads it for a process reward model."""
        return {"id": self.id, "prompt": self.prompt, "steps": self.steps}

    def described(self) -> dict[str, Any]:
        return {"id": self.id, "steps": len(self.steps), "prompt": "text" if self.text_prompt else "messages"}


@dataclass(frozen=True)
class StepRows:
    rows: list[StepCheckRow]
    source: str  # what the report says the rows are

    def report(self) -> dict[str, Any]:
        return {
            "rows": len(self.rows),
            "rows_source": self.source,
            "text_prompts": sum(r.text_prompt for r in self.rows),
            "message_prompts": sum(not r.text_prompt for r in self.rows),
            "rows_used": [r.described() for r in self.rows],
        }


def step_check_rows(target: Path, rows_file: Path | None, limit: int) -> StepRows:
    """--check-rows FILE, else the run's held-out split, else (a bare model folder) the built-in rows."""
    if limit < 1:
        raise RmspecError(f"--check-limit {limit}: must be at least 1", "give the number of rows to compare, e.g. 32")
    if rows_file is not None:
        rows = read_step_rows(rows_file)[:limit]
        return StepRows(rows, f"{rows_file} (first {len(rows)} rows)")
    if is_run(target):
        return held_out_steps(target, limit)
    rows = [StepCheckRow(m, s, id=f"built-in-{i}", text_prompt=i == 1) for i, (m, s) in enumerate(BUILT_IN_STEPS)]
    return StepRows(rows[:limit], f"{len(rows[:limit])} built-in rows ({target} is a model folder, not a run)")


def held_out_steps(run: Path, limit: int) -> StepRows:
    """Rows spread evenly over the run's validation split, up to `limit`."""
    import datasets

    folder = validation_folder(run)
    split = datasets.load_from_disk(str(folder))
    if "prompt_messages" not in split.column_names or "steps" not in split.column_names:
        raise RmspecError(
            f"{folder}: the split keeps no conversation as written (prompt_messages) with its steps (a run whose "
            "data stage predates issue 48 keeps only the rendered prompt)",
            STEP_ROWS_HINT + ", or run the spec again",
        )
    rows = []
    for n, index in enumerate(spread(len(split), limit)):
        record = split[index]
        messages = [{"role": m["role"], "content": m["content"]} for m in record["prompt_messages"]]
        single_turn = len(messages) == 1 and messages[0]["role"] == "user"
        rows.append(
            StepCheckRow(messages, list(record["steps"]), str(record.get("id", index)), single_turn and n % 2 == 0)
        )
    if not rows:
        raise RmspecError(f"{run}: the validation split ({folder}) has no rows", STEP_ROWS_HINT)
    return StepRows(rows, f"the run's validation split ({folder}): {len(rows)} of {len(split)} rows")


def _step_row(row: dict, n: int) -> StepCheckRow:
    prompt = next(row[c] for c in PROMPT_COLUMNS if c in row)
    steps = next(row[c] for c in STEP_COLUMNS if c in row)
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise ValueError("steps must be a list of texts")
    text = isinstance(prompt, str)
    messages = [{"role": "user", "content": prompt}] if text else list(prompt)
    return StepCheckRow(messages, steps, str(row.get("id", n)), text)


def read_step_rows(path: Path) -> list[StepCheckRow]:
    """--check-rows for a process reward model: a prompt (text or messages) and a list of steps per line."""
    return read_jsonl_rows(
        path,
        _step_row,
        what="a process check row",
        hint=STEP_ROWS_HINT,
        empty_hint="give at least one prompt with its steps",
    )
