"""Freeze a VLM's vision tower and/or projector (spec `model.vision.freeze`).

The parts are found by the names transformers gives them: the vision encoder is `visual` (Qwen2-VL
family) or `vision_tower` (LLaVA, Gemma 3, Idefics3 as `vision_model`); the projector is the vision
encoder's `merger` (Qwen2-VL family) or the model's `multi_modal_projector` / `connector`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ENCODERS = ("visual", "vision_tower", "vision_model")
PROJECTORS = ("multi_modal_projector", "connector")


def _find(model: Any, names: tuple[str, ...]) -> Any:
    for module in model.modules():
        for name in names:
            found = getattr(module, name, None)
            if found is not None and hasattr(found, "parameters"):
                return found
    return None


def parts(model: Any) -> dict[str, list[Any]]:
    """{"vision_tower": [its parameters], "projector": [its parameters]} (empty where not found)."""
    encoder = _find(model, ENCODERS)
    projector = getattr(encoder, "merger", None) if encoder is not None else None
    if projector is None:
        projector = _find(model, PROJECTORS)
    in_projector = {id(p) for p in projector.parameters()} if projector is not None else set()
    tower = [p for p in encoder.parameters() if id(p) not in in_projector] if encoder is not None else []
    return {"vision_tower": tower, "projector": list(projector.parameters()) if projector is not None else []}


def freeze(model: Any, names: Sequence[str]) -> dict[str, int]:
    """Stop the named parts training; returns the parameters frozen per part. A part the model does not
    have raises ValueError naming it."""
    found = parts(model)
    frozen = {}
    for name in names:
        if not found[name]:
            raise ValueError(f"model.vision.freeze: {type(model).__name__} has no {name} to freeze")
        for parameter in found[name]:
            parameter.requires_grad_(False)
        frozen[name] = sum(p.numel() for p in found[name])
    return frozen


HEADS = ("score", "lm_head", "classifier")


def language_linears(model: Any, targets: Any) -> list[str]:
    """Full names of the linear layers LoRA should wrap in a VLM's language model: every linear there
    for ``all-linear``, else those whose last name part is one of ``targets``. The vision tower, the
    projector and the heads are left out."""
    import torch

    skip = {id(p) for name in ("vision_tower", "projector") for p in parts(model)[name]}
    names = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name.split(".")[-1] in HEADS:
            continue
        if any(id(p) in skip for p in module.parameters()):
            continue
        if targets == "all-linear" or name.split(".")[-1] in targets:
            names.append(name)
    if not names:
        raise ValueError(f"model.lora.target_modules {targets!r} names no linear layer of the language model")
    return names
