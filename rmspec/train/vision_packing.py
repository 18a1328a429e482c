"""Prompt-once packing for VLM reward pairs (in train: it builds on rmspec.inference.prefix_mask): ``[prompt with image | chosen | rejected]`` in one row.

The prompt, its image's visual tokens included, is computed once per pair (the vision tower runs
once per image, not once per side), and each response attends to the prompt and causally to
itself, never to the other response (rmspec.inference.prefix_mask's layout and mask, which text
packing uses too).

What M-RoPE changes: a VLM's positions are 3-D (time, height, width). Over the image they follow
the image's grid; after it, text positions continue from the grid's extent, not from the token
count. So the positions come from the model's own ``get_rope_index`` over ``[prompt | chosen]``,
and the rejected response restarts at the position where chosen started (text tokens have the
three components equal). Naive 1-D positions (the token index) change the rewards by 1e-3 to
2e-2 (REFERENCE 16); tests/test_vision_packing.py catches them.

One pair per row (a row's images are its pair's). A model whose attention cannot take the pair
mask (flash attention; Gemma 3's bidirectional image attention; Qwen3.5's linear attention)
raises NotPackable, and such a model trains unpacked. A batch one of whose pairs has a picture in a
reply (a whole-conversation pair whose assistant turns hold image parts: only the prompt is computed
once) is collated unpacked, as VisionPairCollator does, and trains so; the other batches pack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rmspec.inference.packed_forward import compute_dtype, head_module
from rmspec.inference.prefix_mask import (
    MASKED_ATTENTION,
    NotPackable,
    PackedRows,
    additive_mask,
    allowed,
    attention_implementation,
    model_config,
    pack_groups,
    split_shared_prefix,
    unwrapped,
)
from rmspec.vision.collate import VisionEncoder, VisionPairCollator
from rmspec.vision.marks import PICTURE_ID
from rmspec.vision.shapes import packing_refusal


def why_not_packable(config: Any) -> str | None:
    """None where prompt-once packing applies to this VLM; else the reason it trains unpacked (the plan
    gives the same reason: rmspec.vision.shapes.packing_refusal)."""
    refusal = packing_refusal(config.model_type)
    if refusal is not None:
        return refusal
    impl = attention_implementation(config)
    if impl not in MASKED_ATTENTION:
        return f"attention {impl!r} takes no custom 4D mask (packing needs sdpa or eager)"
    return None


@dataclass
class VisionPackedPairCollator:
    """One row per pair. Keys: input_ids [B, W], packed_group / packed_branch [B, W], packed_ends [2B]
    (chosen k at 2k, rejected at 2k + 1), prefix_len / chosen_len / images_per_row [B], and the
    chosen side's pixel_values, image_grid_thw and the packed rows' mm_token_type_ids."""

    encoder: VisionEncoder

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if any(picture_in_a_reply(r["chosen_input_ids"], r["rejected_input_ids"]) for r in rows):
            return VisionPairCollator(self.encoder)(rows)  # this batch unpacked: the trainers read both kinds
        images = [r["images"] or [] for r in rows]
        chosen = self.encoder([r["chosen_input_ids"] for r in rows], images)
        rejected = self.encoder([r["rejected_input_ids"] for r in rows], images)
        return pack_encoded(
            chosen, rejected, [len(i) for i in images], self.encoder.processor.tokenizer.pad_token_id, rows
        )


def picture_in_a_reply(chosen: list[int], rejected: list[int]) -> bool:
    """Whether a picture's place (rmspec.vision.marks.PICTURE_ID) lies after the pair's shared prefix."""
    shared = 0
    for a, b in zip(chosen, rejected):
        if a != b:
            break
        shared += 1
    return PICTURE_ID in chosen[shared:] or PICTURE_ID in rejected[shared:]


def pack_encoded(
    chosen: dict[str, torch.Tensor],
    rejected: dict[str, torch.Tensor],
    images_per_row: list[int],
    pad_token_id: int,
    rows: list[dict[str, Any]] | None = None,
) -> dict[str, torch.Tensor]:
    """The packed batch from the processor's outputs for the chosen and the rejected texts."""
    groups = []
    for b in range(len(images_per_row)):
        c = chosen["input_ids"][b][chosen["attention_mask"][b].bool()].tolist()
        r = rejected["input_ids"][b][rejected["attention_mask"][b].bool()].tolist()
        groups.append(split_shared_prefix([c, r]))
    packed = pack_groups(groups, pad_token_id, several_per_row=False)
    mm = torch.zeros_like(packed.input_ids)
    for b, group in enumerate(groups):
        p = len(group.prefix)
        if "mm_token_type_ids" in chosen:
            mm[b, :p] = chosen["mm_token_type_ids"][b, :p]
        if int(mm[b, p:].abs().sum()) or int(chosen["mm_token_type_ids"][b, p:].abs().sum()):
            raise NotPackable("an image inside a response: only the prompt's images are computed once")
    batch = {
        "input_ids": packed.input_ids,
        "packed_group": packed.group,
        "packed_branch": packed.branch,
        "packed_ends": packed.ends,
        "prefix_len": torch.tensor([len(g.prefix) for g in groups]),
        "chosen_len": torch.tensor([len(g.responses[0]) for g in groups]),
        "images_per_row": torch.tensor(images_per_row),
        "mm_token_type_ids": mm,
        "margin": torch.tensor([float((r or {}).get("margin") or 0.0) for r in (rows or [{}] * len(groups))]),
    }
    for key in ("pixel_values", "image_grid_thw"):
        if key in chosen:
            batch[key] = chosen[key]
    if rows and "tie" in rows[0]:
        batch["tie"] = torch.tensor([bool(r["tie"]) for r in rows], dtype=torch.bool)
    return batch


def is_vision_packed(inputs: dict[str, Any]) -> bool:
    return "prefix_len" in inputs and "packed_ends" in inputs


def rope_owner(model: Any) -> Any:
    """The module with ``get_rope_index`` (the base model under the head, through wrappers)."""
    inner = unwrapped(model)
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    for candidate in (inner, getattr(inner, "model", None)):
        if candidate is not None and hasattr(candidate, "get_rope_index"):
            return candidate
    raise NotPackable(f"{type(inner).__name__} has no get_rope_index (no M-RoPE positions to pack with)")


def packed_positions(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """(3, B, W) positions: get_rope_index over [prompt | chosen]; rejected restarts where chosen started."""
    ids = inputs["input_ids"]
    owner = rope_owner(model)
    positions = torch.zeros((3, *ids.shape), dtype=torch.long, device=ids.device)
    grids = inputs.get("image_grid_thw")
    first = 0
    for b in range(ids.shape[0]):
        p, c = int(inputs["prefix_len"][b]), int(inputs["chosen_len"][b])
        n_images = int(inputs["images_per_row"][b])
        row_grids = grids[first : first + n_images] if grids is not None and n_images else None
        first += n_images
        pc = slice(0, p + c)
        if row_grids is None:
            pos = torch.arange(p + c, device=ids.device).expand(3, 1, -1)
        else:
            pos, _ = owner.get_rope_index(
                ids[b : b + 1, pc], inputs["mm_token_type_ids"][b : b + 1, pc], image_grid_thw=row_grids
            )
        positions[:, b, pc] = pos[:, 0]
        width = int((inputs["packed_branch"][b] == 2).sum())
        start = positions[:, b, p]  # where chosen started: text, so the three components are equal
        positions[:, b, p + c : p + c + width] = start[:, None] + torch.arange(width, device=ids.device)
    return positions


def packed_vision_pair_rewards(
    model: Any, inputs: dict[str, torch.Tensor], positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) rewards of a VisionPackedPairCollator batch, from one forward pass;
    ``positions`` overrides the M-RoPE positions (the test passes naive 1-D ones to show they differ)."""
    chosen, rejected = packed_vision_pair_outputs(model, inputs, positions)
    return chosen[:, 0], rejected[:, 0]


def packed_vision_pair_outputs(
    model: Any, inputs: dict[str, torch.Tensor], positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) head outputs [B, K] of a VisionPackedPairCollator batch: every output of a
    widened head (ODIN's quality and length, an ensemble's members: rmspec.train.heads)."""
    config = model_config(model)
    reason = why_not_packable(config)
    if reason is not None:
        raise NotPackable(reason)
    rows = PackedRows(
        inputs["input_ids"],
        torch.zeros_like(inputs["input_ids"]),
        inputs["packed_group"],
        inputs["packed_branch"],
        inputs["packed_ends"],
    )
    mask = additive_mask(allowed(rows), compute_dtype(model)).to(rows.input_ids.device)
    if positions is None:
        positions = packed_positions(model, inputs)
    captured: list[torch.Tensor] = []
    handle = head_module(model).register_forward_hook(lambda _m, _i, out: captured.append(out))
    extra = {k: inputs[k] for k in ("pixel_values", "image_grid_thw") if k in inputs}
    try:
        model(
            input_ids=rows.input_ids,
            attention_mask=mask,
            position_ids=positions,
            mm_token_type_ids=inputs["mm_token_type_ids"],
            **extra,
        )
    finally:
        handle.remove()
    per_token = captured[-1]
    scores = per_token.reshape(-1, per_token.shape[-1])[rows.ends.to(per_token.device)]
    return scores[0::2], scores[1::2]
