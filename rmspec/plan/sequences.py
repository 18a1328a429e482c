"""The plan's sequences: which packing path training takes (rmspec.plan.packing, with a VLM's own refusal), the
list size of a listwise approach, and the packed row's length bound read from the data (a prompt-once row
[prompt | chosen | rejected] or [prompt | r_1 | ... | r_N]). Never imports torch."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.estimate import (
    CHARS_PER_TOKEN,
    PADDING_ALLOWANCE,
    padded_mean,
    prompt_once_tokens,
    sample_rows,
    text_columns,
)
from rmspec.plan.fields import Sequences
from rmspec.plan.model_shape import ModelShape
from rmspec.plan.packing import OFF, SHARED_PREFIX, plan_packing
from rmspec.plan.recipes import list_size, packed_list_lengths
from rmspec.plan.text_chars import text_chars
from rmspec.spec.row_kinds import PAIRS
from rmspec.vision.shapes import packing_refusal


def sequences_of(loaded, declared, shape: ModelShape, attn: str, split: bool = False) -> Sequences:
    """``split``: hardware.context_parallel above 1 (pointwise, process and generative pack their rows only then)."""
    spec, training = loaded.spec, loaded.spec.training
    lists = declared.sequences_per_example is None
    n_list, list_how = list_size(spec, loaded.base_dir) if lists else (None, None)
    packing, packing_reason = plan_packing(training.packing, declared, shape.architecture, attn, split)
    vlm = shape.extra.get("vision_model_type")
    if packing == SHARED_PREFIX and vlm:  # a VLM's image pairs pack with M-RoPE where that is built
        refusal = packing_refusal(vlm)
        if refusal is not None and training.packing == SHARED_PREFIX:
            raise PlanError(
                f"training.packing: shared_prefix cannot apply: {refusal}",
                hint="set training.packing: auto (or off) to train with one sequence per response",
            )
        packing, packing_reason = (
            (OFF, f"auto: {refusal}")
            if refusal is not None
            else (SHARED_PREFIX, f"{packing_reason}; a VLM ({vlm}): each image encoded once per pair, M-RoPE positions")
        )
    if packing != SHARED_PREFIX or not declared.shared_prefix:
        # pointwise's and process's packed row is its one sequence (no prompt shared): bound by training.max_length as unpacked
        return Sequences(lists, n_list, list_how, packing, packing_reason)
    if lists:  # one row [prompt | r_1 | ... | r_N] per prompt
        assert n_list is not None, "list_size ran above for an approach of N sequences per example"
        lengths = packed_list_lengths(spec.data, spec.approach.row_kind, loaded.base_dir, training.max_length, n_list)
    else:  # one row [prompt | chosen | rejected] per pair: memory from the row bound P + C + R
        first = spec.data.mixture()[0]
        lengths = packed_lengths(first.source, first.mapping, loaded.base_dir, training.max_length)
    return Sequences(lists, n_list, list_how, packing, packing_reason, *lengths)


def packed_lengths(source, mapping, base_dir: Path, max_length: int) -> tuple[int, int, int, str]:
    """Shared-prefix rows of Bradley-Terry pairs: (expected tokens per row for time, the row bound for
    memory, expected tokens per pair unpacked, how they were found).

    Per sampled pair (tokens guessed as in sequence_length): the prompt P is cut once so that both
    P + C and P + R fit max_length, as the data stage cuts it; the row is P + C + R and the
    unpacked pair (P + C) + (P + R). The memory bound is max_length + the longest sampled response
    (P + C <= max_length, so P + C + R <= max_length + R), or 2 x max_length without a sample.
    """
    bound = 2 * max_length
    unknown = (
        bound,
        bound,
        bound,
        f"max_length {max_length} x 2 per prompt-once row (no pair lengths could be sampled)",
    )
    columns = text_columns(mapping, PAIRS)
    if columns is None or source.kind not in ("files", "sql") or (source.kind == "sql" and not source.sqlite):
        return unknown
    rows = sample_rows(source, base_dir)
    prompt_col, (chosen_col, rejected_col) = columns
    packed, unpacked, longest = [], [], 0.0
    for row in rows or []:
        if not isinstance(row, dict):
            return unknown
        rejected: Any = row.get(rejected_col)
        answers = rejected if mapping.holds_answers(rejected) else [rejected]
        for answer in answers:  # a rejected list: a pair per answer
            lengths = [
                text_chars((row.get(prompt_col) if prompt_col else "") or ""),
                *map(text_chars, (row.get(chosen_col), answer)),
            ]
            if None in lengths:
                continue
            p, c, r = (n / CHARS_PER_TOKEN for n in lengths if n is not None)
            packed_row, two = prompt_once_tokens(p, [c, r], max_length)
            packed.append(packed_row)
            unpacked.append(two)
            longest = max(longest, min(c, max_length), min(r, max_length))
    if not packed:
        return unknown
    mean_row, pair = padded_mean(packed, bound), padded_mean(unpacked, bound)
    row_bound = min(bound, max_length + math.ceil(longest))
    how = (
        f"mean prompt-once row {mean_row} vs {pair} tokens per pair unpacked, from {len(packed)} "
        f"sampled pairs at {CHARS_PER_TOKEN:g} chars/token, +{PADDING_ALLOWANCE:.0%} padding"
    )
    return mean_row, row_bound, pair, how
