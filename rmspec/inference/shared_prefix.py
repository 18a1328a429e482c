"""Prompt-once scoring: all responses to one prompt in one shared-prefix row.

Pair benchmarks score chosen and rejected, best-of-N benchmarks (RewardBench 2: four or more
completions per prompt) score N responses; a causal decoder computes their common prompt once
(rows, positions and mask from rmspec.inference.prefix_mask, the code training uses). Each
response is encoded and cut exactly as it is scored alone, then the common token prefix of the
group is shared, so the scores equal one-sequence-at-a-time scoring (tests/test_packing_scoring.py).

torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def can_share_prompt(model: Any) -> bool:
    """A causal decoder with a score head and an attention that takes a custom mask."""
    from rmspec.inference.packed_forward import head_module
    from rmspec.inference.prefix_mask import NotPackable, check_packable

    try:
        check_packable(model.config)
        head_module(model)
    except NotPackable:
        return False
    return True


def grouped_head_outputs(
    model: Any, groups: Sequence[Sequence[Sequence[int]]], pad_token_id: int, batch_size: int = 32
) -> list[list[list[float]]]:
    """Head outputs per sequence of each group (sequences that answer one prompt), in input order;
    about ``batch_size`` sequences per forward pass, groups sorted by length. Where the packed rows attend through
    a whole-row mask (a GPU, a sliding-window model, rows of 512 columns or fewer), a batch is also cut where that
    mask (rows x width x width) would pass rmspec.inference.batches.MASK_ELEMENTS, and a group too wide for it
    alone is scored one response at a time, with no mask (the same scores)."""
    import torch

    from rmspec.inference import batches, progress
    from rmspec.inference.packed_forward import keeps_mask, packed_head_outputs
    from rmspec.inference.prefix_mask import pack_groups, split_shared_prefix, to_device
    from rmspec.inference.scoring import head_outputs

    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    device = next(model.parameters()).device
    built = {i: split_shared_prefix([list(s) for s in g]) for i, g in enumerate(groups) if len(g)}
    out: list[list[list[float]]] = [[] for _ in groups]
    order = sorted(built, key=lambda i: len(built[i]))

    def mask_fits(count: int, width: int) -> bool:  # count groups, at most count rows of the widest group
        return not keeps_mask(model, device, width) or count * width * width <= batches.MASK_ELEMENTS

    with torch.inference_mode():
        start = 0
        while start < len(order):
            if not mask_fits(1, len(built[order[start]])):  # alone, each response attends causally, no mask
                out[order[start]] = head_outputs(model, groups[order[start]], pad_token_id, batch_size)
                start += 1
                continue
            batch: list[int] = []
            sequences = 0
            while start < len(order) and (
                not batch
                or (
                    sequences + len(built[order[start]].responses) <= batch_size
                    and mask_fits(len(batch) + 1, len(built[order[start]]))
                )
            ):
                batch.append(order[start])
                sequences += len(built[order[start]].responses)
                start += 1
            rows = to_device(pack_groups([built[i] for i in batch], pad_token_id), device)
            values = packed_head_outputs(model, rows).float().cpu().tolist()
            cursor = 0
            for i in batch:
                n = len(built[i].responses)
                out[i] = [[float(v) for v in row] for row in values[cursor : cursor + n]]
                cursor += n
            progress.advance(sequences)  # lines only where a caller asked (rmspec.inference.progress)
    return out
