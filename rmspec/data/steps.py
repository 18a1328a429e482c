"""Process reward data: step lists with one label per step, and their tokenization.

Presets (the canonical record is `prompt_messages`, `steps`, `step_labels`: 1 correct, 0 wrong):

- `stepwise`: `prompt`, `completions` (the steps), `labels` (bools): TRL's PRM format, as in
  `trl-lib/math_shepherd` and `trl-lib/prm800k`;
- `math-shepherd`: the raw Math-Shepherd row: `input` holds the question and the steps, each
  step followed by the marker `ки`; `label` is the same text with `+` or `-` in each marker's
  place. The question ends where "Step 1:" begins (as TRL's conversion script splits it);
- `processbench`: `problem`, `steps`, `label` (index of the first wrong step, -1 when all are
  right). For training, a solution is kept up to its first wrong step: the steps after it are
  unlabelled in ProcessBench (they may be right or wrong), so they are left out, not guessed.

Tokenization follows TRL's PRMTrainer: every step is tokenized on its own, the separator's
tokens (tokenized once, alone) are appended, and the label sits on the separator's last token;
every other token is -100. The prompt is laid out as the data pipeline lays out any prompt
(chat template, encoder text pair, or plain "User: ... Assistant:"). Over-long rows lose whole
steps from the end, never half a step; a row where not even the first step fits is rejected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rmspec.data.layout import PAIR, PLAIN, TEMPLATE, Layout
from rmspec.data.records import Reject
from rmspec.errors import DataError

IGNORE = -100
MATH_SHEPHERD_MARK = "ки"
FIRST_STEP = re.compile(r"step 1\s*:", re.IGNORECASE)


# ---------------------------------------------------------------- presets


def steps_record(labels_as: str, row: dict[str, Any], cols: dict[str, Any], messages_of) -> dict[str, Any]:
    """The canonical process record of one source row (raises Reject with a reason). `labels_as`: how
    the row writes its labels: "bools" (one per step), "marked_text" (Math-Shepherd's text with +/- in
    place of the markers) or "first_error" (ProcessBench's index of the first wrong step)."""
    steps_col, labels_col = cols.get("steps", "completions"), cols.get("step_labels", "labels")
    if labels_as == "marked_text":
        prompt, steps, labels = math_shepherd(_get(row, steps_col), _get(row, labels_col))
        return {"prompt_messages": messages_of(prompt, "input"), "steps": steps, "step_labels": labels}
    prompt_col = cols.get("prompt")
    prompt = messages_of(_get(row, prompt_col), "prompt") if prompt_col else []
    steps = step_list(_get(row, steps_col))
    raw = _get(row, labels_col)
    if labels_as == "first_error":
        steps, labels = first_error_labels(raw, steps)
    else:
        labels = bool_labels(raw, len(steps))
    return {"prompt_messages": prompt, "steps": steps, "step_labels": labels}


def _get(row: dict[str, Any], column: str) -> Any:
    value = row.get(column)
    if value is None:
        raise Reject("missing_field", f"column {column!r} is missing or null")
    return value


def step_list(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise Reject("wrong_type", f"steps must be a list of texts, got {type(value).__name__}")
    if not value:
        raise Reject("no_steps", "the solution has no steps")
    if any(not s.strip() for s in value):
        raise Reject("empty_step", f"step {next(i for i, s in enumerate(value) if not s.strip())} is empty")
    return list(value)


def bool_labels(value: Any, n_steps: int) -> list[int]:
    if not isinstance(value, list):
        raise Reject("wrong_type", f"labels must be a list of booleans, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or v in (0, 1):
            out.append(int(v))
        else:
            raise Reject("wrong_type", f"labels[{i}] must be true/false, got {v!r}")
    if len(out) != n_steps:
        raise Reject("label_count_mismatch", f"{len(out)} label(s) for {n_steps} step(s): {value!r}")
    return out


def first_error_labels(value: Any, steps: list[str]) -> tuple[list[str], list[int]]:
    """ProcessBench: steps up to and including the first wrong one, labelled 1..1 0 (or all 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Reject("wrong_type", f"label must be the index of the first wrong step or -1, got {value!r}")
    if value == -1:
        return steps, [1] * len(steps)
    if not 0 <= value < len(steps):
        raise Reject("label_count_mismatch", f"first wrong step {value} is outside the {len(steps)} step(s)")
    return steps[: value + 1], [1] * value + [0]


def math_shepherd(text: Any, label_text: Any) -> tuple[str, list[str], list[int]]:
    """(question, steps, labels) from a raw Math-Shepherd row."""
    if not isinstance(text, str) or not isinstance(label_text, str):
        raise Reject("wrong_type", "math-shepherd input and label must be texts")
    # One character per marker, so positions in the input match positions in the label text.
    flat = text.replace(MATH_SHEPHERD_MARK, "\x00")
    marks = [i for i, ch in enumerate(flat) if ch == "\x00"]
    if not marks:
        raise Reject("no_steps", f"no {MATH_SHEPHERD_MARK!r} step marker in the input")
    if len(label_text) != len(flat):
        raise Reject(
            "label_count_mismatch",
            f"the label text ({len(label_text)} characters) does not line up with the input ({len(flat)} once each "
            f"{MATH_SHEPHERD_MARK!r} is one character)",
        )
    labels = []
    for i in marks:
        if label_text[i] not in "+-":
            raise Reject(
                "label_count_mismatch", f"the label text has {label_text[i]!r} where a step marker needs + or -"
            )
        labels.append(1 if label_text[i] == "+" else 0)
    pieces = flat.split("\x00")[: len(marks)]
    match = FIRST_STEP.search(pieces[0])
    if match is None:
        raise Reject("malformed", "cannot tell the question from the first step (no 'Step 1:')")
    question = pieces[0][: match.start()].strip()
    steps = [pieces[0][match.start() :].strip(), *(p.strip() for p in pieces[1:])]
    if not question:
        raise Reject("missing_field", "the input has no question before 'Step 1:'")
    if any(not s for s in steps):
        raise Reject("empty_step", "a step between two markers is empty")
    return question, steps, labels


# ---------------------------------------------------------------- tokens


@dataclass
class StepSequence:
    """A prompt and its steps as the model reads them."""

    ids: list[int]
    labels: list[int]  # per token: the step label at each kept step's last token, else -100
    type_ids: list[int] | None
    ends: list[int]  # position of each kept step's last token
    prompt_tokens: int
    total_tokens: int  # before any step was dropped
    steps_dropped: int


def separator_ids(layout: Layout, separator: str) -> list[int]:
    ids = layout.encode([separator])[0]
    if not ids:
        raise DataError(
            f"approach.step_separator {separator!r} tokenizes to nothing with this tokenizer, so a step's label "
            "has no token of its own",
            "choose a separator the tokenizer keeps (encoders drop newlines: try ' ;' or ' ки')",
        )
    return ids


class StepEncoder:
    """Prompt + steps -> ids and per-token labels, for training, evaluation and serving alike."""

    def __init__(self, layout: Layout, separator: str):
        self.layout = layout
        self.sep = separator_ids(layout, separator)
        if layout.kind == PLAIN:
            self.mid = layout.encode(["\n"])[0]
        else:
            self.mid = list(layout.pair_mid) if layout.kind == PAIR else []

    def _prompt_parts(self, prompts: list[list[dict[str, str]]]) -> list[tuple[list[int], list[int]]]:
        """(head special tokens, prompt tokens) per prompt."""
        texts = self.layout.prompt_texts(prompts)
        ids = self.layout.encode(texts)
        out = []
        for p in ids:
            if self.layout.kind == TEMPLATE:
                k = 0
                while k < len(p) and p[k] in self.layout.special_ids:
                    k += 1
                out.append((p[:k], p[k:]))
            elif self.layout.kind == PAIR:
                out.append((list(self.layout.pair_head), p))
            else:
                out.append((list(self.layout.single_head), p))
        return out

    def encode(
        self,
        prompts: list[list[dict[str, str]]],
        steps: list[list[str]],
        labels: list[list[int]] | None,
        max_tokens: int,
    ) -> list[StepSequence | None]:
        """One StepSequence per row, or None when not even the first step fits."""
        heads = self._prompt_parts(prompts)
        flat = [s for row in steps for s in row]
        step_ids = self.layout.encode(flat)
        tail = list(self.layout.pair_tail) if self.layout.kind == PAIR else []
        types = self.layout.pair_types if self.layout.kind == PAIR else None
        out: list[StepSequence | None] = []
        cursor = 0
        for r, (head, prompt) in enumerate(heads):
            pieces = [ids + self.sep for ids in step_ids[cursor : cursor + len(steps[r])]]
            cursor += len(steps[r])
            fixed = len(head) + len(prompt) + len(self.mid) + len(tail)
            total = fixed + sum(len(p) for p in pieces)
            keep, used = 0, fixed
            for p in pieces:  # whole steps only, from the start
                if used + len(p) > max_tokens:
                    break
                keep, used = keep + 1, used + len(p)
            if keep == 0:
                out.append(None)
                continue
            ids = head + prompt + self.mid
            token_labels = [IGNORE] * len(ids)
            ends = []
            row_labels = labels[r] if labels is not None else [IGNORE] * len(pieces)
            for p, lab in zip(pieces[:keep], row_labels):
                ids = ids + p
                token_labels += [IGNORE] * (len(p) - 1) + [int(lab)]
                ends.append(len(ids) - 1)
            ids += tail
            token_labels += [IGNORE] * len(tail)
            type_ids = None
            if types is not None:
                n_first = len(head) + len(prompt)
                type_ids = (
                    [types[0]] * len(head)
                    + [types[1]] * len(prompt)
                    + [types[2]] * len(self.mid)
                    + [types[3]] * (len(ids) - n_first - len(self.mid) - len(tail))
                    + [types[4]] * len(tail)
                )
            out.append(StepSequence(ids, token_labels, type_ids, ends, len(prompt), total, len(pieces) - keep))
        return out


def process_columns(layout: Layout) -> dict[str, Any]:
    from datasets import List, Value

    cols = {
        "prompt": Value("string"),
        "input_ids": List(Value("int32")),
        "labels": List(Value("int32")),
        "prompt_tokens": Value("int32"),
        "length": Value("int32"),
        "total_tokens": Value("int32"),
        "steps_dropped": Value("int32"),
        "truncated": Value("bool"),
    }
    if layout.kind == PAIR and layout.pair_types is not None:
        cols["token_type_ids"] = List(Value("int8"))
    return cols


class StepTokenizeStage:
    """Batched map for process records: token columns, whole steps dropped from the end, rejects."""

    def __init__(self, layout: Layout, separator: str, max_tokens: int, policy: str, stage: str = "filter:max_length"):
        self.encoder = StepEncoder(layout, separator)
        self.layout = layout
        self.max_tokens = max_tokens
        self.policy = policy
        self.stage = stage
        self.types = layout.kind == PAIR and layout.pair_types is not None

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        n = len(batch["id"])
        live = [i for i in range(n) if not batch["reject_reason"][i]]
        prompts = [batch["prompt_messages"][i] for i in live]
        # policy drop: a row that does not fit whole leaves whole (encode with no limit, then check).
        limit = 10**9 if self.policy == "drop" else self.max_tokens
        seqs = dict(
            zip(
                live,
                self.encoder.encode(
                    prompts, [batch["steps"][i] for i in live], [batch["step_labels"][i] for i in live], limit
                ),
            )
        )
        shown = dict(zip(live, self.layout.prompt_texts(prompts)))
        out: dict[str, list] = {
            "prompt": [""] * n,
            "input_ids": [[] for _ in range(n)],
            "labels": [[] for _ in range(n)],
            "prompt_tokens": [0] * n,
            "length": [0] * n,
            "total_tokens": [0] * n,
            "steps_dropped": [0] * n,
            "truncated": [False] * n,
        }
        if self.types:
            out["token_type_ids"] = [[] for _ in range(n)]
        for i in live:
            s = seqs[i]
            out["prompt"][i] = shown[i]
            if s is not None and self.policy == "drop" and s.total_tokens > self.max_tokens:
                self._reject(batch, i, "too_long", f"{s.total_tokens} tokens > max {self.max_tokens}")
                continue
            if s is None:
                labels = batch["step_labels"][i]
                self._reject(
                    batch,
                    i,
                    "no_step_fits",
                    f"the prompt and the first step exceed max {self.max_tokens} tokens; all "
                    f"{len(labels)} step label(s) dropped: {list(labels)}",
                )
                continue
            out["input_ids"][i], out["labels"][i] = s.ids, s.labels
            out["prompt_tokens"][i], out["length"][i], out["total_tokens"][i] = (
                s.prompt_tokens,
                len(s.ids),
                s.total_tokens,
            )
            out["steps_dropped"][i], out["truncated"][i] = s.steps_dropped, s.steps_dropped > 0
            if s.steps_dropped:  # the record says what the model learns from
                kept = len(s.ends)
                batch["steps"][i] = batch["steps"][i][:kept]
                batch["step_labels"][i] = batch["step_labels"][i][:kept]
            if self.types:
                out["token_type_ids"][i] = s.type_ids
        return {**batch, **out}

    def _reject(self, batch: dict[str, list], i: int, reason: str, detail: str) -> None:
        batch["reject_stage"][i] = self.stage
        batch["reject_reason"][i] = reason
        batch["reject_detail"][i] = detail


def step_report(pool: Any) -> dict[str, Any]:
    """Step counts of the kept rows for the data report: how many steps, how many wrong, how many dropped."""
    import numpy as np

    labels = pool["step_labels"] if "step_labels" in pool.column_names else []
    n_steps = np.array([len(x) for x in labels], dtype=np.int64)
    wrong = np.array([len(x) - sum(x) for x in labels], dtype=np.int64)
    dropped = np.asarray(pool["steps_dropped"], dtype=np.int64) if "steps_dropped" in pool.column_names else np.zeros(0)
    return {
        "rows": int(n_steps.size),
        "steps": int(n_steps.sum()),
        "wrong_steps": int(wrong.sum()),
        "rows_with_a_wrong_step": int((wrong > 0).sum()),
        "steps_dropped_past_max_length": int(dropped.sum()),
        "rows_with_steps_dropped": int((dropped > 0).sum()),
        "mean_steps_per_row": round(float(n_steps.mean()), 3) if n_steps.size else 0.0,
    }
