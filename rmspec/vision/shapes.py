"""The vision tower's size from a VLM's config.json, for the planner (light: no torch, no Pillow):
its parameters (Qwen2-VL / Qwen2.5-VL and the ViT families: LLaVA, LLaVA-OneVision, Gemma 3, Idefics3,
SmolVLM), its shape, and the bytes its forward saves for backward (per patch for Qwen's tower, per
tower-size image for a ViT's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def vision_tower_parameters(config: dict[str, Any]) -> int | None:
    """Parameters of a VLM's vision side from its config.json (no torch): the tower, the projector and
    any loose vision parameter (LLaVA-OneVision's image_newline); None for a family not counted here.
    Exact for every family in :data:`COUNTED_TYPES` (tests/test_vision_tokens.py and
    tests/test_vision_plan_families.py count the real modules)."""
    parts = vision_part_parameters(config)
    return None if parts is None else sum(parts) + loose_vision_parameters(config)


def vision_part_parameters(config: dict[str, Any]) -> tuple[int, int] | None:
    """(the vision tower's parameters, the projector's), the parts model.vision.freeze names
    (rmspec.vision.freeze: the tower module, and the merger / multi_modal_projector / connector);
    None for a family not in :data:`COUNTED_TYPES`."""
    vision = config.get("vision_config")
    model_type = config.get("model_type")
    if not isinstance(vision, dict):
        return None
    if model_type in ("qwen2_vl", "qwen2_5_vl"):
        return _qwen_parts(vision, str(model_type))
    if model_type in FAMILY_TOWER:
        return _vit_parts(config, vision, str(model_type))
    return None


def loose_vision_parameters(config: dict[str, Any]) -> int:
    """Vision parameters in neither part model.vision.freeze names: LLaVA-OneVision's image_newline (one
    vector of the text width, appended after each row of an any-resolution image's features)."""
    if config.get("model_type") != "llava_onevision" or vision_part_parameters(config) is None:
        return 0
    return int(_text_width(config) or 0)


def _qwen_parts(vision: dict[str, Any], model_type: str) -> tuple[int, int]:
    """Qwen2-VL / Qwen2.5-VL: the merger (2x2 patches into one token) is the projector."""
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


#: The ViT tower a family builds when its vision_config names no model_type (transformers' defaults).
FAMILY_TOWER = {
    "llava": "clip_vision_model",
    "llava_onevision": "siglip_vision_model",
    "gemma3": "siglip_vision_model",
    "idefics3": "idefics3_vision",
    "smolvlm": "smolvlm_vision",
}

#: Each ViT tower config class's defaults (transformers 5), for the keys a saved config.json may leave
#: out because they equal them (hidden, MLP, layers, patch, image size, channels).
TOWER_DEFAULTS: dict[str, tuple[int, int, int, int, int, int]] = {
    "clip_vision_model": (768, 3072, 12, 32, 224, 3),
    "siglip_vision_model": (768, 3072, 12, 16, 224, 3),
    "idefics3_vision": (1152, 3072, 12, 32, 224, 3),
    "smolvlm_vision": (1152, 3072, 12, 32, 224, 3),
}

#: Model types whose vision parameters this module counts.
COUNTED_TYPES = ("qwen2_vl", "qwen2_5_vl", *FAMILY_TOWER)


def _text_width(config: dict[str, Any]) -> int | None:
    text = config.get("text_config")
    width = text.get("hidden_size") if isinstance(text, dict) else None
    return None if width is None else int(width)


def _vit_parts(config: dict[str, Any], vision: dict[str, Any], model_type: str) -> tuple[int, int] | None:
    """A CLIP / SigLIP-style tower (pre-norm blocks: LayerNorm, q/k/v/out with bias, LayerNorm, fc1-GELU-fc2)
    and the family's projector, as transformers instantiates them:

    - CLIP (LLaVA keeps the whole CLIPVisionModel): class_embedding, a patch conv without bias, one
      position per patch plus the class token's, pre_layrnorm and post_layernorm.
    - SigLIP (LLaVA-OneVision, Gemma 3), Idefics3 / SmolVLM's tower: a patch conv with bias, one
      position per patch, post_layernorm; SigLIP's attention-pooling head where vision_use_head
      (its default; LLaVA-OneVision and Gemma 3 checkpoints set it false).
    - projector: LLaVA / LLaVA-OneVision's multi_modal_projector (linear_1 from the selected layers'
      features, GELU, linear_2, biases per multimodal_projector_bias); Gemma 3's (mm_input_projection_weight,
      mm_soft_emb_norm: an RMSNorm of the vision width); Idefics3 / SmolVLM's connector (one bias-free
      linear over scale_factor^2 pixel-shuffled features).
    None where the text width (text_config.hidden_size) is missing."""
    text = _text_width(config)
    kind = str(vision.get("model_type") or FAMILY_TOWER[model_type])
    if text is None or kind not in TOWER_DEFAULTS:
        return None
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size", "num_channels")
    h, m, layers, patch, image, channels = (int(vision.get(k, d)) for k, d in zip(keys, TOWER_DEFAULTS[kind]))
    positions = (image // patch) ** 2
    block = 2 * (2 * h) + 4 * (h * h + h) + (h * m + m) + (m * h + h)
    conv = channels * patch * patch * h
    if kind == "clip_vision_model":
        outside = h + conv + (positions + 1) * h + 2 * (2 * h)  # class token, positions, pre and post LayerNorm
    else:
        outside = conv + h + positions * h + 2 * h  # conv bias, positions, post_layernorm
    if kind == "siglip_vision_model" and vision.get("vision_use_head", True):
        outside += (
            h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * m + m) + (m * h + h)
        )  # probe, attention, norm, MLP
    tower = outside + layers * block
    if model_type in ("llava", "llava_onevision"):
        selected = config.get("vision_feature_layer", -2 if model_type == "llava" else -1)
        features = h * (len(selected) if isinstance(selected, list) else 1)
        bias = text if config.get("multimodal_projector_bias", True) else 0
        projector = (features * text + bias) + (text * text + bias)
    elif model_type == "gemma3":
        projector = h * text + h
    else:  # idefics3, smolvlm
        projector = h * int(config.get("scale_factor", 2)) ** 2 * text
    return tower, projector


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
