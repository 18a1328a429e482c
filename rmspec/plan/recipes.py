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
from rmspec.plan.estimate import data_sequence_length, sample_rows
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
        sizes = [1 + (len(r[column]) if isinstance(r[column], list) else 1) for r in rows or [] if r.get(column)]
        if sizes:
            return max(sizes), f"1 chosen + the largest of {len(sizes)} sampled rows' {column!r}"
    sizes = [len(r[column]) for r in rows or [] if isinstance(r.get(column), list)]
    if sizes:
        return max(sizes), f"the largest of {len(sizes)} sampled rows' {column!r} lists"
    return DEFAULT_LIST_SIZE, f"not read from the data: {DEFAULT_LIST_SIZE} (UltraFeedback's rated completions)"


def packed_list_lengths(data: Any, approach: str, base_dir: Path, max_length: int, n: int) -> tuple[int, int, int, str]:
    """Shared-prefix listwise rows [prompt | r_1 | ... | r_N]: (tokens per row for time, the row bound
    for memory, tokens per prompt unpacked, how). Each [prompt | r_k] fits max_length, so a row is
    at most N x max_length; for time the row is counted as its N sequences' tokens (the prompt's
    saving is not estimated here: an upper bound)."""
    per_sequence, how = data_sequence_length(data, approach, base_dir, max_length)
    tokens = n * per_sequence
    return (
        tokens,
        n * max_length,
        tokens,
        (f"{n} x {how} (prompt-once saving not estimated; the row bound is {n} x max_length)"),
    )


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
