"""The plan's steps for a vision-language model, in the order rmspec.plan.compile takes them (light:
no torch, no Pillow): the visual tokens per row and the tower's patches (a Qwen2-VL family model:
rmspec.plan.vision), or the tower-size images per example (a ViT tower: LLaVA, Gemma 3, Idefics3, ...:
rmspec.plan.vision_vit); the frozen vision parameters; the notes; plan.json's vision section. For a
text model each step gives nothing and changes nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rmspec.plan.fields import Sequences
from rmspec.plan.memory import GIB, MemoryEstimate, TrainingShape
from rmspec.plan.model_shape import ModelShape, vision_notes
from rmspec.plan.vision import VisualPlan, other_family_note, visual_plan
from rmspec.plan.vision_vit import VitImages, vit_images, vit_note
from rmspec.vision.shapes import visual_token_note


def qwen_visual_plan(spec: Any, shape: ModelShape, model_path: str | None, data_report: Path) -> VisualPlan | None:
    """A VLM's visual tokens per row (the data's where its report exists) and the tower's patches; None
    for a text model or a family without the Qwen2-VL rule's settings."""
    if not shape.extra.get("vision_model_type"):
        return None
    vision = spec.model.vision
    return visual_plan(model_path, vision, data_report, spec.training.max_length, spec.model.lora is not None)


def vit_plan(spec: Any, shape: ModelShape, model_path: str | None, data_report: Path) -> VitImages | None:
    """Tower-size images per example for a ViT tower (LLaVA, Gemma 3, Idefics3, ...); None otherwise."""
    if not shape.extra.get("vit_shape"):
        return None
    model_type = str(shape.extra["vision_model_type"])
    return vit_images(model_path, model_type, data_report, spec.model.vision, spec.model.lora is not None)


def with_visual_tokens(seqs: Sequences, visual: VisualPlan | None) -> Sequences:
    """Packed rows' expected lengths (time only) with the images' mean visual tokens: the sampled text
    read each image as its placeholder; once per packed row, once per side unpacked. The row bound for
    memory needs nothing: P + C <= max_length counts them already (rmspec.data.tokenize)."""
    if visual is None or not seqs.packed or seqs.row_tokens is None or seqs.pair_tokens is None:
        return seqs
    extra = round(visual.mean_tokens_per_row)
    return replace(
        seqs,
        row_tokens=seqs.row_tokens + extra,
        pair_tokens=seqs.pair_tokens + 2 * extra,
        packed_how=f"{seqs.packed_how} + {extra} visual tokens per copy of the row's images",
    )


def frozen_vision(spec: Any, shape: ModelShape) -> int:
    """Parameters model.vision.freeze keeps at their loaded weights (rmspec.vision.shapes counts the parts)."""
    freeze = set(spec.model.vision.freeze) if spec.model.vision is not None else set()
    projector = shape.extra.get("vision_projector_parameters", 0)
    tower = shape.extra.get("vision_tower_part_parameters", 0)  # LLaVA-OneVision's image_newline is in neither
    return (tower if "vision_tower" in freeze else 0) + (projector if "projector" in freeze else 0)


def vision_lines(
    spec: Any,
    shape: ModelShape,
    model_path: str | None,
    data_report: Path,
    vit: VitImages | None,
    base: TrainingShape,
    memory: MemoryEstimate,
) -> tuple[list[str], list[str]]:
    """(notes, warnings): the plan's lines on a VLM. Notes: its vision parameters, the visual tokens each
    image adds, and (a ViT tower) how its activations were sized. Warnings: activations the plan could
    not count (a tower family it does not size, a folder without image processor settings)."""
    sized = bool(shape.extra.get("vision_shape") or shape.extra.get("vit_shape"))
    notes, warnings = (vision_notes(shape), []) if sized else ([], vision_notes(shape))
    if shape.extra.get("vision_model_type"):  # a VLM: the visual tokens each image adds
        notes += visual_token_note(model_path, spec.model.vision)
        image_processor = spec.model.vision.image_processor if spec.model.vision is not None else None
        notes += other_family_note(model_path, data_report, spec.training.max_length, image_processor)
    if shape.extra.get("vit_shape"):
        if vit:
            notes += vit_note(vit, base.seqs_per_example, memory.vision_activations / GIB)
        else:
            warnings.append("vision tower activations not counted: the model folder has no image processor settings")
    return notes, warnings


def vision_section(visual: VisualPlan | None, base: TrainingShape, memory: MemoryEstimate) -> dict | None:
    """plan.json's vision section (rendered as the plan's images line) for a VLM with known processor settings."""
    if visual is None:
        return None
    section = visual.to_json(base.seqs_per_example, round(memory.vision_activations / GIB, 3))
    return {**section, "frozen_parameters": base.vision_frozen_parameters}
