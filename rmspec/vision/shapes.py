"""The vision tower's size from a VLM's config.json, for the planner (light: no torch, no Pillow):
its parameters, its shape, and the bytes its forward saves for backward per patch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def vision_tower_parameters(config: dict[str, Any]) -> int | None:
    """Parameters of a VLM's vision tower and projector from its config.json (no torch): exact for
    Qwen2-VL and Qwen2.5-VL (tests/test_vision_tokens.py counts the modules); None for others."""
    parts = vision_part_parameters(config)
    return None if parts is None else sum(parts)


def vision_part_parameters(config: dict[str, Any]) -> tuple[int, int] | None:
    """(the vision tower's parameters, the projector's: the merger into the language model), the
    parts model.vision.freeze names; None for families other than Qwen2-VL / Qwen2.5-VL."""
    vision = config.get("vision_config")
    model_type = config.get("model_type")
    if not isinstance(vision, dict) or model_type not in ("qwen2_vl", "qwen2_5_vl"):
        return None
    channels = int(vision.get("in_channels") or vision.get("in_chans") or 3)
    patch, temporal = int(vision.get("patch_size", 14)), int(vision.get("temporal_patch_size", 2))
    merge = int(vision.get("spatial_merge_size", 2))
    if model_type == "qwen2_vl":
        e = int(vision["embed_dim"])
        m = int(e * vision.get("mlp_ratio", 4))
        out = int(vision["hidden_size"])
        block = 4 * e + (3 * e * e + 3 * e) + (e * e + e) + (m * e + m) + (e * m + e)  # LayerNorms, attention, MLP
        ln_q = 2 * e
    else:
        e = int(vision["hidden_size"])
        m = int(vision["intermediate_size"])
        out = int(vision["out_hidden_size"])
        block = 2 * e + (3 * e * e + 3 * e) + (e * e + e) + 2 * (e * m + m) + (m * e + e)  # RMSNorms, gated MLP
        ln_q = e
    q = e * merge * merge
    merger = ln_q + (q * q + q) + (out * q + out)
    return channels * temporal * patch * patch * e + int(vision["depth"]) * block, merger


@dataclass(frozen=True)
class VisionShape:
    """What sizes the vision tower's activations (Qwen2-VL: LayerNorm, quick-GELU MLP of 3 saved
    tensors; Qwen2.5-VL: RMSNorm, gated SiLU MLP of 4)."""

    model_type: str
    depth: int
    width: int  # the blocks' hidden size (embed_dim in Qwen2-VL, hidden_size in Qwen2.5-VL)
    mlp: int  # the MLP's inner size
    heads: int
    patch_input: int  # channels x temporal_patch_size x patch_size^2: one patch's pixels
    merge_size: int
    rms_norm: bool

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def vision_shape(config: dict[str, Any]) -> VisionShape | None:
    """The vision tower's shape from a Qwen2-VL / Qwen2.5-VL config.json; None for other models."""
    vision = config.get("vision_config")
    model_type = config.get("model_type")
    if not isinstance(vision, dict) or model_type not in ("qwen2_vl", "qwen2_5_vl"):
        return None
    channels = int(vision.get("in_channels") or vision.get("in_chans") or 3)
    patch, temporal = int(vision.get("patch_size", 14)), int(vision.get("temporal_patch_size", 2))
    qwen2 = model_type == "qwen2_vl"
    width = int(vision["embed_dim"] if qwen2 else vision["hidden_size"])
    return VisionShape(
        model_type=str(model_type),
        depth=int(vision["depth"]),
        width=width,
        mlp=int(width * vision.get("mlp_ratio", 4)) if qwen2 else int(vision["intermediate_size"]),
        heads=int(vision.get("num_heads", 16)),
        patch_input=channels * temporal * patch * patch,
        merge_size=int(vision.get("spatial_merge_size", 2)),
        rms_norm=not qwen2,
    )


def saved_bytes_per_patch(
    v: VisionShape,
    element: int,
    *,
    tower: bool = True,
    projector: bool = True,
    checkpointing: bool = False,
    eager_patches: int = 0,
) -> float:
    """Bytes the vision tower's forward keeps for backward per patch (the patches of one image or
    several alike), counted tensor by tensor for transformers' Qwen2-VL / Qwen2.5-VL vision code
    (``element``: bytes of the compute dtype; SDPA attention, dropout off).

    A block keeps its two norms (LayerNorm: input, output and two statistics; RMSNorm: the fp32
    upcast, its rsqrt, the normalised and the scaled output), q, k, the qkv output, the attention
    output and its projection input (7 x width), an fp32 log-sum-exp per head and its MLP (3 or 4 x
    mlp). Outside the blocks: the patch embedding's input pixels, the rotary cos/sin (fp32, shared)
    and the merger (its norm, and each linear's input). With checkpointing a block keeps its input
    only (the one block recomputed in backward is :func:`block_bytes_per_patch`). A frozen tower keeps
    nothing below the merger; a frozen projector drops its two linears' inputs; both frozen: nothing.
    ``eager_patches``: eager attention also keeps each head's score matrix (patches of one image).
    Exact against torch.autograd.graph.saved_tensors_hooks on tiny towers (tests/test_vision_plan_memory.py).
    """
    if not tower and not projector:
        return 0.0
    e, w = element, v.width
    norm = 4 * w + 4 + 2 * e * w if v.rms_norm else 2 * e * w + 2 * e
    merger = norm + 2 * e * w if projector else norm  # + the two linears' inputs (4 x width per merged token)
    if not tower:
        return float(merger)
    if checkpointing:
        blocks = float(v.depth * e * w)
        rotary = 0
    else:
        blocks = v.depth * block_bytes_per_patch(v, e, eager_patches)
        rotary = 2 * v.head_dim * 4
    window_index = 4 if v.rms_norm else 0  # Qwen2.5-VL's int64 window order, gathered and restored
    return float(e * v.patch_input + rotary + blocks + merger + window_index)


def block_bytes_per_patch(v: VisionShape, element: int, eager_patches: int = 0) -> float:
    """One vision block's saved bytes per patch (see :func:`saved_bytes_per_patch`)."""
    e, w = element, v.width
    norm = 4 * w + 4 + 2 * e * w if v.rms_norm else 2 * e * w + 2 * e
    attention = 7 * e * w + 4 * v.heads + 2 * e * v.heads * eager_patches
    mlp = (4 if v.rms_norm else 3) * e * v.mlp
    return float(2 * norm + attention + mlp)


#: Model types whose ``get_rope_index`` gives the 3-D positions prompt-once packing uses
#: (rmspec.train.vision_packing); the others train with two sequences per pair.
PACKABLE_TYPES = ("qwen2_vl", "qwen2_5_vl")


def packing_refusal(model_type: str) -> str | None:
    """Why a VLM of this type trains image pairs unpacked; None where prompt-once packing applies."""
    if model_type in PACKABLE_TYPES:
        return None
    return (
        f"{model_type} is a vision-language model: prompt-once packing with M-RoPE is built for "
        f"{', '.join(PACKABLE_TYPES)} (others: bidirectional image attention, linear attention or positions "
        "that take no pair mask here), so it trains two sequences per pair"
    )


def visual_token_note(model_path: str | None, vision: Any = None) -> list[str]:
    """The plan's line on visual tokens per image: the bounds the processor resizes every image into
    (model.vision's min_pixels / max_pixels, else the model folder's preprocessor_config.json), as
    tokens. smart_resize keeps the area within [min_pixels, max_pixels] with sides multiples of
    patch_size * merge_size (except a thin image, whose short side is raised to one multiple:
    VisualSettings.most_tokens), and each (patch_size * merge_size)^2 pixels become one token. Empty
    where the folder holds no processor settings (a hub id not on disk, a text model)."""
    from rmspec.vision.tokens import run_settings

    settings = run_settings(model_path, vision)  # model.vision's bounds applied, as the processor applies them
    if settings is None:
        return []
    low, high = settings.min_pixels, settings.max_pixels
    unit = (settings.patch_size * settings.merge_size) ** 2
    source = (
        "model.vision"
        if getattr(vision, "min_pixels", None) or getattr(vision, "max_pixels", None)
        else "the model folder's processor settings"
    )
    most = settings.most_tokens()  # thin images can pass max_pixels' count
    return [
        f"visual tokens per image: {max(1, -(-low // unit))} to at most {most} "
        f"(min_pixels {low:,}, max_pixels {high:,} from {source}; {unit:,} pixels per token); each one is a "
        "position in the sequence the language model reads, counted in max_length by the data stage"
    ]
