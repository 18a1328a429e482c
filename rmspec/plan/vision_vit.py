"""The images a fixed-size ViT tower encodes per example, for the plan (LLaVA, LLaVA-OneVision, Gemma 3,
Idefics3, SmolVLM; light: no torch). Qwen2-VL's variable-size tower is rmspec.plan.vision's.

Every picture becomes one or more images of the tower's size (tiles: rmspec.vision.shapes.
most_tiles_per_image, the most the family's image processor makes, from the folder's saved settings).
Pictures per row come from the data report (RUN/data_report.json) when it exists, else one. Unpacked
pairs carry a copy of the row's pictures on each side (these families never pack: shapes.packing_refusal).
The memory model sizes the tower's activations from these (rmspec.plan.memory.vision_activation_bytes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.vision.vit_shapes import vit_tiles_per_image


@dataclass(frozen=True)
class VitImages:
    tiles_per_picture: int  # the most tower-size images one picture becomes
    pictures_per_row: int
    source: str  # where pictures per row came from, in words
    tower_trained: bool

    def tiles(self, sequences: int) -> int:
        """Tower-size images per example: ``sequences`` copies of the row's pictures."""
        return self.tiles_per_picture * self.pictures_per_row * sequences


def vit_images(model_path: str | None, model_type: str, data_report: Path, vision: Any, lora: bool) -> VitImages | None:
    """None where the folder holds no image processor settings (a hub id not on disk)."""
    tiles = vit_tiles_per_image(model_path, model_type, getattr(vision, "image_processor", None))
    if tiles is None:
        return None
    freeze = set(getattr(vision, "freeze", None) or ())
    adapted = not lora or getattr(vision, "lora_on", "language_model") == "all"  # LoRA elsewhere: tower frozen
    pictures = _pictures_per_row(data_report)
    source = (
        f"{pictures} (data report {data_report})"
        if pictures
        else f"1 (no data report at {data_report}; the data's: `rmspec data report SPEC --json > {data_report}`)"
    )
    return VitImages(tiles, pictures or 1, source, adapted and "vision_tower" not in freeze)


def _pictures_per_row(path: Path) -> int:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        return int(report["images"]["images_per_row"]["max"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def vit_note(images: VitImages, sequences: int, activations_gb: float) -> list[str]:
    """The plan's line on a ViT tower's activations."""
    if not images.tower_trained:
        return ["vision tower frozen: its forward runs but keeps nothing for backward (0 GB of activations)"]
    return [
        f"vision tower: {images.tiles(sequences)} tower-size images per example ({images.tiles_per_picture} per "
        f"picture at most, from the image processor's settings; pictures per row: {images.source}"
        f"{'; each side of a pair carries its own copy' if sequences > 1 else ''}): {activations_gb:.3f} GB of "
        "activations at the chosen micro batch, in `activations`"
    ]
