"""The process kind: a process reward model (rmspec's, or any token classifier as TRL's PRMTrainer
saves it), its engine `rmspec.inference.process.StepEngine`.

`rmspec score` with a process reward model: per-step scores and the predicted first wrong step.

Rows hold a prompt and a list of steps: ProcessBench's `problem` + `steps`, TRL's `prompt` +
`completions`, or the columns named with `--columns prompt=COL,steps=COL`. Each scored row gets
`step_scores` (P(correct) per step that fits in max_length), `first_error` (the first step with
P < the model's threshold, -1 for none), `steps_scored` and `truncated` (steps past max_length,
which get no score).
"""

from __future__ import annotations

from typing import Any

from rmspec.errors import DataError
from rmspec.inference.encoding import Prompt
from rmspec.inference.process import StepEngine, is_token_classifier
from rmspec.inference.scorers.base import Found, Rejected, ScorerType
from rmspec.inference.scorers.shapes import Shape, reason
from rmspec.messages import Invalid, Problem, conversation, text_list
from rmspec.spec.benchmarks import ScoredAs
from rmspec.spec.scorer_kind import ScorerKind

STEPS = "steps"
PROMPT_COLUMNS = ("problem", "prompt", "question", "query")
STEP_COLUMNS = ("steps", "completions")


def step_shape(columns: list[str], named: dict[str, str]) -> Shape:
    prompt = named.get("prompt") or next((c for c in PROMPT_COLUMNS if c in columns), None)
    steps = named.get("steps") or next((c for c in STEP_COLUMNS if c in columns), None)
    if prompt is None or steps is None:
        what = "prompt" if prompt is None else "steps"
        raise DataError(
            f"a process reward model scores a prompt and its steps; found no {what} "
            f"column among {', '.join(columns) or '(none)'}",
            "name them: --columns prompt=COL,steps=COL (steps: a list of texts)",
        )
    return Shape(STEPS, {"prompt": prompt, "steps": steps})


def step_item(row: dict[str, Any], shape: Shape) -> tuple[Prompt, list[str]]:
    """(prompt, steps) of a row; a row that cannot be scored raises rmspec.messages.Invalid."""
    prompt_col, steps_col = shape.columns["prompt"], shape.columns["steps"]
    prompt = row.get(prompt_col)
    if isinstance(prompt, list) and prompt:  # a conversation: its messages checked as everywhere
        prompt = conversation(prompt, prompt_col)
    elif not isinstance(prompt, str) or not prompt:
        raise Invalid(Problem.MISSING, prompt_col, "missing or empty prompt", prompt_col, value=prompt)
    return prompt, text_list(row.get(steps_col), steps_col)


def step_reason(exc: Invalid) -> tuple[str, str]:
    """(reason, kind) as `shapes.reason` words them, but a missing prompt as this module always has."""
    if exc.problem == Problem.MISSING:
        return f"missing or empty prompt '{exc.column}'", f"missing or empty prompt '{exc.column}'"
    return reason(exc)


def step_columns(engine: StepEngine, items: list[tuple[Prompt, list[str]]]) -> list[dict[str, Any]]:
    """The score columns of each (prompt, steps) item."""
    return [
        {
            "step_scores": s.scores,
            "first_error": s.prediction,
            "steps_scored": s.steps_scored,
            "truncated": s.steps_scored < s.steps_total,
        }
        for s in engine.score_steps(items)
    ]


class ProcessKind(ScorerType):
    kind = ScorerKind.PROCESS
    description = "a process reward model: P(correct) per step"
    scored_as = ScoredAs.PROCESS
    reads_steps = True
    per_token = True
    # a token classifier read at each step separator
    card_use: tuple[str, ...] = (
        "A process reward model: AutoModelForTokenClassification with 2 labels (0 wrong, 1 correct), as",
        "TRL's PRMTrainer saves them. Each step is followed by `config.rmspec.step_separator`; P(step",
        "correct) is softmax(logits)[..., 1] at the separator's last token.",
        "",
        "```bash",
        "rmspec score PATH rows.jsonl --out scored.jsonl   # rows: problem/prompt + steps -> step_scores, first_error",
        'rmspec serve PATH                                 # POST /pooling {"input": ids, "task": "token_classify"}',
        "```",
    )

    def claims(self, found: Found) -> bool:
        return found.declared == ScorerKind.PROCESS or is_token_classifier(found.model_dir)

    def load(
        self, found: Found, *, dtype: str, device: str | None, batch_size: int | None, step_separator: str | None
    ) -> StepEngine:
        return StepEngine.load(found.given, dtype=dtype, device=device, batch_size=batch_size, separator=step_separator)

    def shape(self, engine: Any, columns: list[str], named: dict[str, str]) -> Shape:
        return step_shape(columns, named)

    def item(self, engine: Any, row: dict[str, Any], shape: Shape) -> Any:
        try:
            return step_item(row, shape)
        except Invalid as exc:
            return Rejected(*step_reason(exc))

    def score(
        self, engine: Any, shape: Shape, items: list[Any], batch_size: int
    ) -> tuple[list[dict[str, Any] | Rejected], tuple[int, int]]:
        """Per-step scores and the predicted first wrong step."""
        return list(step_columns(engine, items)), (0, 0)

    def encode_text(self, engine: Any, text: str, *, add_special_tokens: bool, limit: int | None) -> Any:
        """Tokenized as the client's text says (its separators placed by the client), cut at the end."""
        return engine.encode_ids(engine.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"], limit)

    def encode_ids(self, engine: Any, ids: list[int], limit: int | None) -> Any:
        return engine.encode_ids(ids, limit)

    def serving(self, engine: Any, normalization: str) -> str:
        """Its clients put the separator after every step: say which one it reads."""
        return f"step separator {engine.separator!r}"


KIND = ProcessKind()
