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

from rmspec.inference.packed_forward import packed_head_outputs
from rmspec.inference.prefix_mask import PackedRows, pack_groups, split_shared_prefix
from rmspec.plan.packing import OFF, SHARED_PREFIX  # noqa: F401  (re-exported: the trainer's names for the paths)

PACKED_KEYS = ("input_ids", "position_ids", "packed_group", "packed_branch", "packed_ends")


@dataclass
class PackedPairCollator:
    """Bradley-Terry batches as shared-prefix rows: one row per pair, or several short pairs per row.

    ``packed_ends`` [2B] holds the flat index of the last token of chosen k (at 2k) and rejected
    k (at 2k + 1); ``margin`` [B] as PairCollator. ``sft``: with the SFT term's targets
    (approach.sft_weight: ``packed_sft_targets``).
    """

    pad_token_id: int
    several_per_row: bool = True
    sft: bool = False

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        pairs = [(list(r["chosen_input_ids"]), list(r["rejected_input_ids"])) for r in rows]
        groups = [split_shared_prefix(list(pair)) for pair in pairs]
        packed = pack_groups(groups, self.pad_token_id, several_per_row=self.several_per_row)
        margin = torch.tensor([float(r.get("margin") or 0.0) for r in rows], dtype=torch.float32)
        batch = packed_batch(packed, margin=margin)
        if self.sft:
            batch.update(packed_sft_targets(packed, pairs))
        if rows and "tie" in rows[0]:  # annotated ties (approach.ties: davidson)
            batch["tie"] = torch.tensor([bool(r["tie"]) for r in rows], dtype=torch.bool)
        return batch


SFT_POSITIONS, SFT_LABELS, SFT_PAIRS = "sft_positions", "sft_labels", "sft_pairs"


def packed_sft_targets(rows: PackedRows, pairs: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
    """The targets of Bradley-Terry's SFT term (rmspec.train.pair_extras.packed_pair_sft) in a packed pair batch:
    the tokens pair_extras.chosen_response_labels labels (the chosen tokens after the longest prefix the pair
    shares, the first token never), each with the flat position whose hidden state predicts it (the token before
    it in the chosen sequence, on the shared prefix or the chosen branch, never the rejected one) and its pair.
    ``pairs``: (chosen, rejected) token ids, in the batch's group order."""
    width = rows.input_ids.shape[1]
    positions, labels, owners = [], [], []
    for g, (chosen, rejected) in enumerate(pairs):
        shared = 0
        while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
            shared += 1
        where = ((rows.group == g) & (rows.branch <= 1)).nonzero()  # the chosen sequence's columns, in order
        flat = where[:, 0] * width + where[:, 1]
        start = max(shared, 1)
        positions.append(flat[start - 1 : len(chosen) - 1])
        labels.append(torch.tensor(chosen[start:], dtype=torch.long))
        owners.append(torch.full((len(labels[-1]),), g, dtype=torch.long))
    return {SFT_POSITIONS: torch.cat(positions), SFT_LABELS: torch.cat(labels), SFT_PAIRS: torch.cat(owners)}


def packed_batch(packed: PackedRows, **extra: torch.Tensor) -> dict[str, torch.Tensor]:
    """A packed collator's batch: ``packed`` under PACKED_KEYS (packed_rows reads them back), then ``extra``."""
    rows = (packed.input_ids, packed.position_ids, packed.group, packed.branch, packed.ends)
    return {**dict(zip(PACKED_KEYS, rows, strict=True)), **extra}


def pack_examples(
    rows: list[dict[str, Any]], pad_token_id: int, several_per_row: bool = True
) -> tuple[PackedRows, list[int]]:
    """Rows that share no prompt (pointwise, process, a judge's), packed where hardware.context_parallel splits them:
    each example's ``input_ids`` one group of one response (split_shared_prefix keeps its last token as the
    response), several short ones to a row; with the flat index of each example's first token (its tokens lie
    together in its row, in order), from which a collator places its read points."""
    groups = [split_shared_prefix([list(r["input_ids"])]) for r in rows]
    packed = pack_groups(groups, pad_token_id, several_per_row=several_per_row)
    firsts = [last - len(r["input_ids"]) + 1 for r, last in zip(rows, packed.ends.tolist(), strict=True)]
    return packed, firsts


def is_packed(inputs: dict[str, Any]) -> bool:
    return "packed_ends" in inputs


def may_attend_by_blocks(inputs: dict[str, Any]) -> bool:
    """Whether a packed text batch's rows are wide enough, on a device that runs it, to attend by blocks
    (rmspec.inference.block_attention.usable, before the model's own reasons): its training step then runs on
    the packed attention whole."""
    from rmspec.inference.block_attention import usable

    ids = inputs.get("input_ids") if is_packed(inputs) and "pixel_values" not in inputs else None
    return ids is not None and usable(ids.device, ids.shape[-1], sliding_window=False, dropout=0.0) is None


def packed_rows(inputs: dict[str, torch.Tensor]) -> PackedRows:
    return PackedRows(
        inputs["input_ids"],
        inputs["position_ids"],
        inputs["packed_group"],
        inputs["packed_branch"],
        inputs["packed_ends"],
    )


def packed_pair_rewards(model: Any, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) rewards of a PackedPairCollator batch, from one forward pass."""
    scores = packed_head_outputs(model, packed_rows(inputs))[:, 0]
    return scores[0::2], scores[1::2]


# ---------------------------------------------------------------- which path


def packing_path(setting: str, approach: Any, config: Any, split: bool = False) -> tuple[str, str]:
    """(path, reason) at run time, from the spec's training.packing and the loaded model's config:
    the plan's rules (rmspec.plan.packing) applied to what the model is. ``shared_prefix`` where
    it cannot apply is an error (exit 2) with the fix. ``split``: the plan splits each row over a
    context-parallel group (pointwise, process and generative rows are packed only then)."""
    from rmspec.inference.prefix_mask import attention_implementation, is_causal
    from rmspec.plan.packing import plan_packing

    architecture = "decoder" if is_causal(config) else "encoder"
    return plan_packing(setting, approach, architecture, attention_implementation(config), split)


def packed_length(chosen: list[int], rejected: list[int]) -> int:
    """Tokens of the pair's shared-prefix row: P + C + R."""
    group = split_shared_prefix([list(chosen), list(rejected)])
    return len(group)
