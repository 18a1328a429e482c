"""What the recipe options (issue 21) change in the plan: responses per row for listwise training,
the SFT term's LM head, and what init_from will take. Light: no torch.

A listwise row is N sequences unpacked ([prompt | r_k] each), so the memory model sees N sequences
per example, or one row of at most N x max_length packed (decoders); N is read from the first rows
of a local source (the largest list there), else 4
(UltraFeedback's four rated completions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec import approaches
from rmspec.approaches.base import LM_HEAD
from rmspec.errors import PlanError
from rmspec.plan.estimate import (
    CHARS_PER_TOKEN,
    PADDING_ALLOWANCE,
    data_sequence_length,
    padded_mean,
    prompt_once_tokens,
    sample_rows,
)
from rmspec.plan.text_chars import text_chars
from rmspec.spec import presets

DEFAULT_LIST_SIZE = 4


def needs_a_decoder(spec: Any, declared: Any, architecture: str | None) -> bool:
    """Whether an LM term trains beside the score head (Bradley-Terry's sft_weight); an encoder is
    refused where the approach or that term needs a causal LM."""
    if declared.causal_lm and architecture == "encoder":
        raise PlanError(
            f"model {spec.model.name_or_path!r} is an encoder; the {declared.name} approach needs a causal LM",
            hint="pick a decoder model or approach kind: bradley_terry",
        )
    sft = declared.uses_lm_head(spec.approach) and declared.head != LM_HEAD
    if sft and architecture == "encoder":
        raise PlanError(
            f"model {spec.model.name_or_path!r} is an encoder; approach.sft_weight adds a next-token loss "
            "that needs a causal LM",
            hint="remove approach.sft_weight, or pick a decoder model",
        )
    return sft


def list_size(spec: Any, base_dir: Path) -> tuple[int, str]:
    """(N, how): responses per listwise row."""
    mapping = spec.data.mapping
    layout = presets.get(mapping.preset)
    column = layout.ranked_from if layout and layout.ranked_from else (mapping.columns.responses or "responses")
    rows = sample_rows(spec.data.source, base_dir) if getattr(spec.data, "source", None) is not None else None
    if mapping.ranks_chosen_over_rejected():  # the chosen answer, then the rejected one or ones
        column = mapping.columns.rejected
        sizes = [1 + (len(r[column]) if mapping.holds_answers(r[column]) else 1) for r in rows or [] if r.get(column)]
        if sizes:
            return max(sizes), f"1 chosen + the largest of {len(sizes)} sampled rows' {column!r}"
    sizes = [len(r[column]) for r in rows or [] if isinstance(r.get(column), list)]
    if sizes:
        return max(sizes), f"the largest of {len(sizes)} sampled rows' {column!r} lists"
    return DEFAULT_LIST_SIZE, f"not read from the data: {DEFAULT_LIST_SIZE} (UltraFeedback's rated completions)"


def packed_list_lengths(data: Any, approach: str, base_dir: Path, max_length: int, n: int) -> tuple[int, int, int, str]:
    """Shared-prefix listwise rows [prompt | r_1 | ... | r_N]: (tokens per row for time, the row bound
    for memory, tokens per prompt unpacked, how). Each [prompt | r_k] fits max_length, so a row is
    at most N x max_length. For time, the sampled rows of one local source give the mean row (the prompt, cut
    as the data stage cuts it so that its longest response fits, then every response) at CHARS_PER_TOKEN,
    + PADDING_ALLOWANCE; else the row is counted as its N sequences' tokens (an upper bound)."""
    bound = n * max_length
    sampled = (
        []
        if data.is_mixture
        else [t for t in map(list_texts(data.mapping), sample_rows(data.source, base_dir) or []) if t]
    )
    if sampled:
        packed: list[float] = []
        unpacked: list[float] = []
        for prompt, responses in sampled:
            packed_row, one_each = prompt_once_tokens(
                prompt / CHARS_PER_TOKEN, [r / CHARS_PER_TOKEN for r in responses], max_length
            )
            packed.append(packed_row)
            unpacked.append(one_each)
        row, per_prompt = padded_mean(packed, bound), padded_mean(unpacked, bound)
        how = (
            f"mean prompt-once row {row} vs {per_prompt} tokens per prompt unpacked, from {len(packed)} sampled lists "
            f"at {CHARS_PER_TOKEN:g} chars/token, +{PADDING_ALLOWANCE:.0%} padding; the row bound is {n} x max_length"
        )
        return row, bound, per_prompt, how
    per_sequence, how = data_sequence_length(data, approach, base_dir, max_length)
    tokens = n * per_sequence
    return (
        tokens,
        bound,
        tokens,
        (f"{n} x {how} (prompt-once saving not estimated; the row bound is {n} x max_length)"),
    )


def list_texts(mapping: Any) -> Any:
    """A function of a sampled row: (prompt characters, each response's characters) of a listwise row, or None where
    its columns are not plain texts (a `responses` list, UltraFeedback's rated `completions`, or chosen and
    rejected columns: rmspec.data.rejected_list)."""
    layout = presets.get(mapping.preset)
    cols = {**(dict(layout.columns) if layout else {}), **{k: v for k, v in mapping.columns.model_dump().items() if v}}

    def read(row: Any) -> tuple[int, list[int]] | None:
        if not isinstance(row, dict):
            return None
        if mapping.ranks_chosen_over_rejected():
            rejected: Any = row.get(cols["rejected"])
            responses = [row.get(cols["chosen"]), *(rejected if mapping.holds_answers(rejected) else [rejected])]
        elif layout is not None and layout.ranked_from:
            items = row.get(layout.ranked_from)
            responses = [c.get("response") if isinstance(c, dict) else None for c in items or []]
        else:
            responses = row.get(cols.get("responses", "responses")) or []
        prompt = text_chars(row.get(cols["prompt"]) or "") if cols.get("prompt") else 0
        sizes = [text_chars(r) for r in responses] if isinstance(responses, list) else [None]
        if prompt is None or len(sizes) < 2 or any(s is None for s in sizes):
            return None
        return prompt, [s for s in sizes if s is not None]

    return read


def recipe_notes(spec: Any, n_list: int | None, list_how: str | None) -> list[str]:
    """Plan warnings for options whose cost or effect the reader should see (none for other specs,
    so their plans are unchanged)."""
    notes = approaches.of(spec).plan_notes(spec, n_list, list_how)
    if spec.model.init_from:
        folder = Path(spec.model.init_from)
        there = "" if (folder / "model" / "config.json").exists() else " (not there yet: run that stage first)"
        notes.append(
            f"model.init_from: weights from {folder / 'model'}{there}: the backbone, and the score head "
            "where its shape agrees"
        )
    return notes
