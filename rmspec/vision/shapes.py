"""The vision tower's size from a VLM's config.json, for the planner (light: no torch, no Pillow)."""

from __future__ import annotations

from typing import Any


def vision_tower_parameters(config: dict[str, Any]) -> int | None:
    """Parameters of a VLM's vision tower and projector from its config.json (no torch): exact for
    Qwen2-VL and Qwen2.5-VL (tests/test_vision_tokens.py counts the modules); None for others."""
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
    return channels * temporal * patch * patch * e + int(vision["depth"]) * block + merger


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
    patch_size * merge_size, and each (patch_size * merge_size)^2 pixels become one token. Empty where
    the folder holds no processor settings (a hub id not on disk, a text model)."""
    from rmspec.vision.tokens import settings_of

    settings = settings_of(model_path)
    if settings is None:
        return []
    low = getattr(vision, "min_pixels", None) or settings.min_pixels
    high = getattr(vision, "max_pixels", None) or settings.max_pixels
    unit = (settings.patch_size * settings.merge_size) ** 2
    source = (
        "model.vision"
        if getattr(vision, "min_pixels", None) or getattr(vision, "max_pixels", None)
        else "the model folder's processor settings"
    )
    return [
        f"visual tokens per image: {max(1, -(-low // unit))} to at most {max(1, high // unit)} "
        f"(min_pixels {low:,}, max_pixels {high:,} from {source}; {unit:,} pixels per token); each one is a "
        "position in the sequence the language model reads, beside max_length's text tokens"
    ]
