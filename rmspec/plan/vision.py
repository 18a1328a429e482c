"""A VLM's images in the plan: visual tokens per row, the patches the vision tower encodes, and
which vision parts train (light: no torch, no Pillow).

Visual tokens per image follow the processor's settings (rmspec.vision.tokens: the model folder's
saved settings, bounded by model.vision's min_pixels / max_pixels). Per row they come from the data
when its report exists (RUN/data_report.json, written by `rmspec run`, or
`rmspec data report SPEC --json > RUN/data_report.json`): the report's largest row, recomputed from
its largest image where it was counted under other pixel bounds. Without it the plan takes the
worst case, the most tokens one image can become (VisualSettings.most_tokens: max_pixels' worth, more
for a thin image) and one image per row, and says how to get the data's.
The vision tower encodes ``tokens x merge_size^2`` patches per row, once per row packed, once per
sequence unpacked (each side of a pair carries its own copy of the images: rmspec.vision.collate).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.vision.tokens import VisualSettings, fixed_tokens_per_image, run_settings


@dataclass(frozen=True)
class VisualPlan:
    settings: VisualSettings  # the processor's, model.vision's bounds applied
    bounds_from: str  # "model.vision" or "the model folder's processor settings"
    tokens_per_row: int  # the largest row's visual tokens: what memory is sized for
    mean_tokens_per_row: float  # for the time estimate
    images_per_row: int
    largest_image_tokens: int
    source: str  # "data_report" or "max_pixels"
    how: str  # where the figure came from, in words (with the command that gives the data's)
    tower_trained: bool
    projector_trained: bool

    @property
    def unit(self) -> int:
        return self.settings.merge_size**2  # patches per visual token

    @property
    def low(self) -> int:
        return max(1, -(-self.settings.min_pixels // (self.settings.patch_size * self.settings.merge_size) ** 2))

    @property
    def high(self) -> int:
        return self.settings.most_tokens()

    def patches_per_example(self, sequences: int) -> int:
        """Patches the tower encodes per example: ``sequences`` copies of the row's images (1 packed)."""
        return self.tokens_per_row * self.unit * sequences

    def to_json(self, sequences: int, activations_gb: float) -> dict[str, Any]:
        s = self.settings
        return {
            "visual_tokens_per_image": {"min": self.low, "max": self.high},
            "pixels": {"min_pixels": s.min_pixels, "max_pixels": s.max_pixels, "from": self.bounds_from},
            "visual_tokens_per_row": {"max": self.tokens_per_row, "mean": self.mean_tokens_per_row},
            "images_per_row": self.images_per_row,
            "tokens_from": self.source,
            "tokens_how": self.how,
            "patches_per_example": self.patches_per_example(sequences),
            "vision_tower_trained": self.tower_trained,
            "projector_trained": self.projector_trained,
            "activations_gb": activations_gb,
        }


def visual_plan(
    model_path: str | None, vision: Any, data_report: Path, max_length: int, lora: bool = False
) -> VisualPlan | None:
    """The images' figures for a VLM whose folder holds Qwen2-VL-style processor settings; None else.
    Never more than max_length visual tokens per row: the data stage rejects a row whose images need
    more (rmspec.data.tokenize). ``lora``: model.lora is set, so the vision parts train only with
    model.vision.lora_on: all."""
    settings = run_settings(model_path, vision)
    if settings is None:
        return None
    bounded = bool(getattr(vision, "min_pixels", None) or getattr(vision, "max_pixels", None))
    freeze = set(getattr(vision, "freeze", None) or ())
    adapted = not lora or getattr(vision, "lora_on", "language_model") == "all"  # LoRA elsewhere: vision frozen
    common = _Common(
        settings,
        "model.vision" if bounded else "the model folder's processor settings",
        adapted and "vision_tower" not in freeze,
        adapted and "projector" not in freeze,
    )
    per_image = settings.most_tokens()  # max_pixels' tokens, or more for a thin image
    images = _images_section(data_report)
    if images is None or not images.get("images"):
        worst = min(per_image, max_length)
        capped = f", capped at max_length {max_length:,} (rows needing more are rejected)" if worst < per_image else ""
        how = (
            f"worst case: the most one image can become under max_pixels ({per_image:,}), one image per row{capped}; "
            f"no data report at {data_report}; the data's own figure: `rmspec data report SPEC --json > "
            f"{data_report}` (or a run writes it), then plan again"
        )
        return VisualPlan(
            tokens_per_row=worst,
            mean_tokens_per_row=float(worst),
            images_per_row=1,
            largest_image_tokens=worst,
            source="max_pixels",
            how=how,
            **common.fields(),
        )
    counted = images.get("processor") or {}
    same = {k: counted.get(k) for k in ("patch_size", "merge_size", "min_pixels", "max_pixels")} == {
        "patch_size": settings.patch_size,
        "merge_size": settings.merge_size,
        "min_pixels": settings.min_pixels,
        "max_pixels": settings.max_pixels,
    }
    n_images = int(images["images_per_row"]["max"])
    largest = settings.tokens(int(images["width"]["max"]), int(images["height"]["max"]))
    rows = images.get("visual_tokens_per_row") or {}
    if same and rows:
        tokens, mean = int(rows["max"]), float(rows["mean"])
        how = f"data report {data_report}: the largest of its {images['rows']:,} rows"
    else:  # counted under other bounds: every image as large as the largest side seen, under these bounds
        tokens = min(n_images * largest, max_length)
        mean = min(round(float(images["images_per_row"]["mean"]) * largest, 2), float(max_length))
        how = (
            f"data report {data_report} counted under other pixel bounds: {n_images} image(s) per row at most, each "
            f"taken at the largest width and height seen ({images['width']['max']}x{images['height']['max']})"
        )
    return VisualPlan(
        tokens_per_row=tokens,
        mean_tokens_per_row=mean,
        images_per_row=n_images,
        largest_image_tokens=min(largest, max_length),
        source="data_report",
        how=how,
        **common.fields(),
    )


@dataclass(frozen=True)
class _Common:
    """What a VisualPlan takes from the settings and the spec, whatever the tokens' source."""

    settings: VisualSettings
    bounds_from: str
    tower_trained: bool
    projector_trained: bool

    def fields(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def _images_section(path: Path) -> dict[str, Any] | None:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    images = report.get("images") if isinstance(report, dict) else None
    needed = ("images_per_row", "width", "height", "rows")
    return images if isinstance(images, dict) and all(k in images for k in needed) else None


def other_family_note(
    model_path: str | None, data_report: Path, max_length: int, image_processor: dict[str, Any] | None = None
) -> list[str]:
    """The plan's line on visual tokens for a VLM the Qwen2-VL rule does not cover (no VisualPlan): a
    fixed count per image where the family has one (LLaVA, Gemma 3: tokens.fixed_tokens_per_image),
    else the data report's figure, else the command that gives it. The data stage counts them all
    exactly in max_length (rmspec.vision.measured), so memory at max_length holds either way."""
    if run_settings(model_path) is not None:
        return []
    images = _images_section(data_report)
    rows = (images or {}).get("visual_tokens_per_row")
    fixed = fixed_tokens_per_image(model_path, image_processor)  # model.vision.image_processor over the folder's
    if rows:
        return [
            f"visual tokens per row: mean {rows['mean']}, max {rows['max']} (data report {data_report}, counted with "
            f"the model's processor); they are positions in the sequence the language model reads, within max_length "
            f"{max_length:,}"
        ]
    command = f"`rmspec data report SPEC --json > {data_report}` (or a run writes it), then plan again"
    if fixed is not None:
        return [
            f"visual tokens per image: {fixed} (fixed by the processor's settings, whatever the image's size); a row "
            f"holds as many times that as it has images, within max_length {max_length:,}; images per row: {command}"
        ]
    return [
        "visual tokens per image depend on the image's size for this model (its processor tiles or splits images): "
        f"the data stage counts them with the processor; their figure per row: {command}"
    ]
