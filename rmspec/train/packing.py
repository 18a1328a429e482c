"""Shared-prefix packing for Bradley-Terry training on decoders: each prompt computed once per pair.

A pair becomes ``[prefix | chosen response | rejected response]`` (rmspec.inference.prefix_mask
builds the rows, positions and mask, the same code scoring uses); several pairs share a row
where they fit in the batch's longest pair. The prefix is the longest common token prefix of
the two tokenized sequences (head + prompt + mid, and any leading response tokens they share),
so the rewards equal the two-sequence forward's (tests/test_packing_exact.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rmspec.inference.prefix_mask import PackedRows, pack_groups, packed_head_outputs, split_shared_prefix

PACKED_KEYS = ("input_ids", "position_ids", "packed_group", "packed_branch", "packed_ends")


@dataclass
class PackedPairCollator:
    """Bradley-Terry batches as shared-prefix rows: one row per pair, or several short pairs per row.

    ``packed_ends`` [2B] holds the flat index of the last token of chosen k (at 2k) and rejected
    k (at 2k + 1); ``margin`` [B] as PairCollator.
    """

    pad_token_id: int
    several_per_row: bool = True

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        groups = [split_shared_prefix([list(r["chosen_input_ids"]), list(r["rejected_input_ids"])]) for r in rows]
        packed = pack_groups(groups, self.pad_token_id, several_per_row=self.several_per_row)
        margin = torch.tensor([float(r.get("margin") or 0.0) for r in rows], dtype=torch.float32)
        return {"input_ids": packed.input_ids, "position_ids": packed.position_ids, "packed_group": packed.group,
                "packed_branch": packed.branch, "packed_ends": packed.ends, "margin": margin}


def is_packed(inputs: dict[str, Any]) -> bool:
    return "packed_ends" in inputs


def packed_rows(inputs: dict[str, torch.Tensor]) -> PackedRows:
    return PackedRows(inputs["input_ids"], inputs["position_ids"], inputs["packed_group"], inputs["packed_branch"],
                      inputs["packed_ends"])


def packed_pair_rewards(model: Any, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) rewards of a PackedPairCollator batch, from one forward pass."""
    scores = packed_head_outputs(model, packed_rows(inputs))[:, 0]
    return scores[0::2], scores[1::2]


def computed_tokens(batch: dict[str, torch.Tensor]) -> int:
    """Token slots the model computes for this batch (padding included)."""
    return int(batch["input_ids"].numel())


# ---------------------------------------------------------------- which path


SHARED_PREFIX, OFF = "shared_prefix", "off"


def packing_path(setting: str, approach_kind: str, config: Any) -> tuple[str, str]:
    """(path, reason) at run time, from the spec's training.packing and the loaded model's config.

    The plan decides the same from the spec and the model's shape (rmspec.plan.packing); this is
    the authority once the model is loaded. ``shared_prefix`` where it cannot apply is an error.
    """
    from rmspec.errors import RmspecError
    from rmspec.inference.prefix_mask import NotPackable, check_packable

    if setting == OFF:
        return OFF, "training.packing: off"
    why = None
    if approach_kind != "bradley_terry":
        why = f"approach {approach_kind}: one sequence per example, no prompt shared between sequences"
    else:
        try:
            check_packable(config)
        except NotPackable as exc:
            why = str(exc)
    if why is None:
        return SHARED_PREFIX, ("training.packing: shared_prefix" if setting == SHARED_PREFIX else
                               "auto: a causal decoder in Bradley-Terry: each prompt computed once per pair")
    if setting == SHARED_PREFIX:
        raise RmspecError(f"training.packing: shared_prefix cannot apply: {why}",
                          hint="set training.packing: auto (or off) to train with two sequences per pair")
    return OFF, f"auto: {why}"


def packed_length(chosen: list[int], rejected: list[int]) -> int:
    """Tokens of the pair's shared-prefix row: P + C + R."""
    group = split_shared_prefix([list(chosen), list(rejected)])
    return len(group)
