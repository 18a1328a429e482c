"""`rmspec score` with a process reward model: per-step scores and the predicted first wrong step.

Rows hold a prompt and a list of steps: ProcessBench's `problem` + `steps`, TRL's `prompt` +
`completions`, or the columns named with `--columns prompt=COL,steps=COL`. Each scored row gets
`step_scores` (P(correct) per step that fits in max_length), `first_error` (the first step with
P < the model's threshold, -1 for none), `steps_scored` and `truncated` (steps past max_length,
which get no score).
"""

from __future__ import annotations

from typing import Any

from rmspec.errors import DataError
from rmspec.score.reader import BadRow
from rmspec.score.shapes import Shape

STEPS = "steps"
PROMPT_COLUMNS = ("problem", "prompt", "question", "query")
STEP_COLUMNS = ("steps", "completions")


def step_shape(columns: list[str], named: dict[str, str]) -> Shape:
    prompt = named.get("prompt") or next((c for c in PROMPT_COLUMNS if c in columns), None)
    steps = named.get("steps") or next((c for c in STEP_COLUMNS if c in columns), None)
    if prompt is None or steps is None:
        raise DataError(f"a process reward model scores a prompt and its steps; found no {'prompt' if prompt is None else 'steps'} "
                        f"column among {', '.join(columns) or '(none)'}",
                        "name them: --columns prompt=COL,steps=COL (steps: a list of texts)")
    return Shape(STEPS, {"prompt": prompt, "steps": steps})


def _item(row: dict[str, Any], shape: Shape) -> tuple[Any, list[str]]:
    from rmspec.score.shapes import Reject

    prompt, steps = row.get(shape.columns["prompt"]), row.get(shape.columns["steps"])
    if not isinstance(prompt, (str, list)) or not prompt:
        raise Reject(f"missing or empty prompt '{shape.columns['prompt']}'")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) and s.strip() for s in steps):
        raise Reject(f"'{shape.columns['steps']}' must be a non-empty list of non-empty texts")
    return prompt, steps


def score_step_chunk(engine: Any, shape: Shape, chunk: list[Any], first_index: int, reject, add):
    """(scored rows, rejects, (real tokens, computed tokens)) for one chunk, as runner._score_chunk."""
    from rmspec.score.shapes import Reject

    kept, rejects = [], []
    for k, row in enumerate(chunk):
        if isinstance(row, BadRow):
            rejects.append(reject(first_index + k, row.reason, row.raw))
            continue
        try:
            kept.append((row, _item(row, shape)))
        except Reject as exc:
            rejects.append(reject(first_index + k, str(exc), row))
    scored = engine.score_steps([item for _, item in kept])
    rows = [add(row, {"step_scores": s.scores, "first_error": s.prediction, "steps_scored": s.steps_scored,
                      "truncated": s.steps_scored < s.steps_total}) for (row, _), s in zip(kept, scored)]
    return rows, rejects, (0, 0)
