"""The plan's sequences: which packing path training takes (rmspec.plan.packing, with a VLM's own refusal), the
list size of a listwise approach, and the packed row's length bound read from the data (a prompt-once row
[prompt | chosen | rejected] or [prompt | r_1 | ... | r_N]). Never imports torch."""

from __future__ import annotations

from rmspec.errors import PlanError
from rmspec.plan.estimate import packed_lengths
from rmspec.plan.fields import Sequences
from rmspec.plan.model_shape import ModelShape
from rmspec.plan.packing import OFF, SHARED_PREFIX, plan_packing
from rmspec.plan.recipes import list_size, packed_list_lengths
from rmspec.vision.shapes import packing_refusal


def sequences_of(loaded, declared, shape: ModelShape, attn: str, sft: bool, split: bool = False) -> Sequences:
    """``split``: hardware.context_parallel above 1 (pointwise, process and generative pack their rows only then)."""
    spec, training = loaded.spec, loaded.spec.training
    lists = declared.sequences_per_example is None
    n_list, list_how = list_size(spec, loaded.base_dir) if lists else (None, None)
    packing, packing_reason = plan_packing(training.packing, declared, shape.architecture, attn, sft, split)
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
