"""A CLIP / SigLIP-style vision tower's shape (LLaVA, LLaVA-OneVision, Gemma 3, Idefics3, SmolVLM) from
config.json, for the planner (light: no torch, no Pillow): the bytes its forward saves per tower-size image
and the most tiles one picture becomes under the family's image processor settings. The Qwen2-VL family's
tower and every family's parameter counts are in rmspec.vision.shapes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.vision.shapes import FAMILY_TOWER, TOWER_DEFAULTS


@dataclass(frozen=True)
class VitShape:
    """A CLIP / SigLIP-style tower (LLaVA, LLaVA-OneVision, Gemma 3, Idefics3, SmolVLM) at its fixed
    input size: every image or tile is resized to ``image_size`` square, so each one is ``positions``
    vectors through every block (CLIP: one per patch plus its class token)."""

    kind: str  # the tower's model_type: clip_vision_model, siglip_vision_model, idefics3_vision, smolvlm_vision
    depth: int
    width: int
    mlp: int
    heads: int
    image_size: int
    patch_size: int
    channels: int
    quick_gelu: bool  # CLIP's x * sigmoid(1.702 x) keeps 3 MLP-wide tensors, tanh GELU 2

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @property
    def positions(self) -> int:
        patches = (self.image_size // self.patch_size) ** 2
        return patches + 1 if self.kind == "clip_vision_model" else patches


def vit_shape(config: dict[str, Any]) -> VitShape | None:
    """The ViT tower's shape from a LLaVA / LLaVA-OneVision / Gemma 3 / Idefics3 / SmolVLM config.json;
    None for other models (Qwen2-VL's tower: :func:`vision_shape`)."""
    vision, model_type = config.get("vision_config"), config.get("model_type")
    if not isinstance(vision, dict) or model_type not in FAMILY_TOWER:
        return None
    kind = str(vision.get("model_type") or FAMILY_TOWER[str(model_type)])
    if kind not in TOWER_DEFAULTS:
        return None
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size", "num_channels")
    h, m, layers, patch, image, channels = (int(vision.get(k, d)) for k, d in zip(keys, TOWER_DEFAULTS[kind]))
    default_act = "quick_gelu" if kind == "clip_vision_model" else "gelu_pytorch_tanh"
    heads = int(vision.get("num_attention_heads", 12 if kind in ("clip_vision_model", "siglip_vision_model") else 16))
    return VitShape(
        kind, layers, h, m, heads, image, patch, channels, vision.get("hidden_act", default_act) == "quick_gelu"
    )


def vit_block_bytes_per_position(v: VitShape, element: int) -> float:
    """One ViT block's saved bytes per position (SDPA attention, dropout off): its input and the first
    norm's output, q, k, v, the attention output (the out projection's input, the same storage), the
    residual sum and the second norm's output (8 x width), each LayerNorm's two statistics, an fp32
    log-sum-exp per head, and the MLP (fc1's output and GELU's; quick GELU also its sigmoid)."""
    e = element
    return float(8 * e * v.width + 2 * 2 * e + 4 * v.heads + (3 if v.quick_gelu else 2) * e * v.mlp)


def vit_saved_bytes(v: VitShape, images: int, element: int, checkpointing: bool = False) -> float:
    """Bytes the ViT tower's forward keeps for backward for ``images`` images (or tiles) at its fixed size,
    projector not included (no checkpointing, tower trained): the input pixels, ``depth`` blocks per
    position, the norm outside the blocks (CLIP's pre_layrnorm, the others' post_layernorm: its input
    and statistics), CLIP's post_layernorm over each class token (a view that keeps the last block's
    whole output), and the int64 position ids (one row
    shared, per image for Idefics3 / SmolVLM). Exact against torch.autograd.graph.saved_tensors_hooks
    on the tiny families' towers (tests/test_vision_plan_families.py); rmspec.plan.memory adds it to
    the estimate. With checkpointing a block keeps its input only;
    the one block recomputed in backward is the caller's (:func:`vit_block_bytes_per_position`)."""
    e, p = element, v.positions
    norm = e * v.width + 2 * e
    block = e * v.width if checkpointing else vit_block_bytes_per_position(v, e)
    per_image = e * v.channels * v.image_size**2 + p * (v.depth * block + norm)
    shared = 8 * p
    if v.kind == "clip_vision_model":
        per_image += p * e * v.width + 2 * e  # post_layernorm over the class token: a view of the last output
    elif v.kind in ("idefics3_vision", "smolvlm_vision"):
        per_image, shared = per_image + 8 * p, 0  # position ids per image (variable-size patch masks)
    return float(images * per_image + shared)


def most_tiles_per_image(model_type: str, image_processor: dict[str, Any]) -> int | None:
    """The most images of the tower's fixed size one picture becomes (what :func:`vit_saved_bytes`
    takes as ``images``), from the image processor's saved settings; None for other families.

    - LLaVA: one (resized and cropped). Gemma 3: one, or with do_pan_and_scan up to
      pan_and_scan_max_num_crops crops plus the picture (not checked against the processor here).
    - LLaVA-OneVision: the base tile plus the largest any-resolution grid in image_grid_pinpoints, in
      size tiles (the anyres_max_9 pooling comes after the tower, so the tower encodes all of them).
    - Idefics3 / SmolVLM: with do_image_splitting, the longest edge is resized to size.longest_edge (a
      small picture scaled up) and split into max_image_size tiles plus a global view:
      ceil(longest / max)^2 + 1 for a square; one without splitting. Assumed: the tile side equals the
      tower's image_size, as in the released checkpoints; padded tiles are dropped before the tower."""
    if model_type == "llava":
        return 1
    if model_type == "gemma3":
        return (
            int(image_processor.get("pan_and_scan_max_num_crops") or 0) + 1
            if image_processor.get("do_pan_and_scan")
            else 1
        )
    if model_type == "llava_onevision":
        size = image_processor.get("size") or {}
        side = int(size.get("height") or size.get("shortest_edge") or 384)
        grid = image_processor.get("image_grid_pinpoints") or [[side, side]]
        return 1 + max((int(h) // side) * (int(w) // side) for h, w in grid)
    if model_type in ("idefics3", "smolvlm"):
        if not image_processor.get("do_image_splitting", True):
            return 1
        longest = int((image_processor.get("size") or {}).get("longest_edge", 4 * 364))
        tile = int((image_processor.get("max_image_size") or {}).get("longest_edge", 364))
        splits = -(-longest // tile)
        return splits * splits + 1 if splits > 1 else 1
    return None


def vit_tiles_per_image(
    model_dir: str | Path | None, model_type: str, overrides: dict[str, Any] | None = None
) -> int | None:
    """:func:`most_tiles_per_image` from the image processor settings saved in the model folder
    (preprocessor_config.json, or processor_config.json's image_processor), each setting in
    ``overrides`` (model.vision.image_processor, as the processor loads them) replacing the folder's;
    None without saved settings."""
    if model_dir is None:
        return None
    for name in ("preprocessor_config.json", "processor_config.json"):
        try:
            data = json.loads((Path(model_dir) / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        image = data.get("image_processor", data) if isinstance(data, dict) else None
        if isinstance(image, dict) and image:
            return most_tiles_per_image(model_type, {**image, **(overrides or {})})
    return None
