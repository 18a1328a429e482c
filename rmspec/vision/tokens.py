"""Visual tokens per image, from the image processor's settings and the image's size (no torch).

The Qwen2-VL family's rule (transformers' ``smart_resize``): the image is resized so each side is a
multiple of ``patch_size * merge_size``, its area within [min_pixels, max_pixels]; it is cut into
``patch_size`` patches, and every ``merge_size x merge_size`` patches become one token. The data
report, the max_length filter (rmspec.data.tokenize) and the plan read it, with model.vision's
min_pixels / max_pixels applied (:func:`bounded`) as the processor applies them
(rmspec.vision.processor.load_processor); tests/test_vision_tokens.py checks it against the processor.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rmspec.vision.images import ImageReject
from rmspec.vision.marks import PICTURE

#: The families whose image processor resizes by this rule (transformers' Qwen2-VL smart_resize).
RULE_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")

#: How one image part is written in the text the processor expands (the chat template's rendering of
#: {"type": "image"}): the Qwen2-VL family's; its one ``<|image_pad|>`` becomes the image's tokens.
QWEN_IMAGE_TEXT = "<|vision_start|><|image_pad|><|vision_end|>"


@dataclass(frozen=True)
class VisualSettings:
    patch_size: int = 14
    merge_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 1280

    def tokens(self, width: int, height: int) -> int:
        h, w = smart_resize(height, width, self.patch_size * self.merge_size, self.min_pixels, self.max_pixels)
        return (h // self.patch_size) * (w // self.patch_size) // (self.merge_size**2)

    def most_tokens(self) -> int:
        """The most visual tokens one image can become. Usually max_pixels / (patch * merge)^2, but a
        side that rounds below one factor is raised to it, and the min_pixels branch rounds up, so a thin
        image (the processor refuses aspect ratios over 200) or a bound min_pixels near max_pixels can go
        over: every aspect ratio is tried, for an image far over max_pixels and one far under min_pixels."""
        factor = self.patch_size * self.merge_size
        most = self.max_pixels // factor**2
        big, small = 1 << 24, 1
        for k in range(1201):
            ratio = 200 ** (k / 1200)
            for short in (big, small):
                most = max(most, self.tokens(short, max(short, int(short * ratio))))
                most = max(most, self.tokens(short, max(short, int(short * ratio) + 1)))
        return most


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """transformers' Qwen2-VL rule, restated (sides multiples of ``factor``, area within the bounds)."""
    h_bar = round(height / factor) * factor  # may round to 0: then the area is under min_pixels, scaled up below
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def settings_of(model_dir: str | Path | None) -> VisualSettings | None:
    """The image processor's settings saved with a model (processor_config.json or
    preprocessor_config.json); None where there are none (a text model, a hub id not on disk)."""
    if model_dir is None:
        return None
    folder = Path(model_dir)
    for name in ("preprocessor_config.json", "processor_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        data = data.get("image_processor", data)
        if "patch_size" not in data or "merge_size" not in data:  # not the Qwen2-VL rule (LLaVA's has patch_size)
            continue
        size = data.get("size") or {}
        defaults = VisualSettings()
        return VisualSettings(
            patch_size=int(data["patch_size"]),
            merge_size=int(data.get("merge_size", defaults.merge_size)),
            min_pixels=int(data.get("min_pixels") or size.get("shortest_edge") or defaults.min_pixels),
            max_pixels=int(data.get("max_pixels") or size.get("longest_edge") or defaults.max_pixels),
        )
    return None


#: Families whose processor gives every image the same visual tokens, whatever its size (light rule).
FIXED_TYPES = ("llava", "gemma3")


def fixed_tokens_per_image(model_dir: str | Path | None, overrides: dict[str, Any] | None = None) -> int | None:
    """Visual tokens per image for a family whose processor repeats its image token a fixed number of
    times (LLaVA: ``(crop / patch_size)^2 + num_additional_image_tokens``, less one CLS under the
    "default" feature strategy, as LlavaProcessor counts; Gemma 3: ``image_seq_length``, the config's
    mm_tokens_per_image); None for other families (their count depends on the image's size: the data
    stage measures it with the processor, rmspec.vision.measured) or a folder without the settings.
    ``overrides``: model.vision.image_processor, over the folder's image processor settings as the
    processor loads them."""
    if model_dir is None:
        return None
    folder = Path(model_dir)
    try:
        model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
        saved = json.loads((folder / "processor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if model_type == "gemma3":
        return int(saved["image_seq_length"]) if "image_seq_length" in saved else None
    if model_type != "llava" or "patch_size" not in saved:
        return None
    image = saved.get("image_processor") or {}
    if not image:
        try:
            image = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    image = {**image, **(overrides or {})}
    crop = image.get("crop_size") or image.get("size") or {}
    height = crop.get("height") or crop.get("shortest_edge")
    width = crop.get("width") or crop.get("shortest_edge")
    if not height or not width:
        return None
    patch = int(saved["patch_size"])
    tokens = (int(height) // patch) * (int(width) // patch) + int(saved.get("num_additional_image_tokens", 0))
    return tokens - 1 if saved.get("vision_feature_select_strategy", "default") == "default" else tokens


def bounded(settings: VisualSettings, vision: Any = None) -> VisualSettings:
    """The settings with model.vision's min_pixels / max_pixels in place of the checkpoint's, as
    rmspec.vision.processor.load_processor builds the processor every stage reads images with."""
    low, high = getattr(vision, "min_pixels", None), getattr(vision, "max_pixels", None)
    return replace(settings, min_pixels=low or settings.min_pixels, max_pixels=high or settings.max_pixels)


def run_settings(model_dir: str | Path | None, vision: Any = None) -> VisualSettings | None:
    """The settings a run's processor resizes images with: the model folder's, bounded by model.vision."""
    settings = settings_of(model_dir)
    return None if settings is None else bounded(settings, vision)


#: The processor's limit on an image's aspect ratio (transformers' Qwen2-VL smart_resize raises past it).
MAX_ASPECT_RATIO = 200


@dataclass(frozen=True)
class ImageTokens:
    """What a row's images become: ``visual`` tokens the vision tower fills (the processor's image
    token, repeated), ``added`` positions beyond the tokens their image parts' text takes unexpanded."""

    visual: int
    added: int


def extra_positions(
    counter: Any, prompt_texts: list[str], prompt_lengths: list[int], refs: list[list[str]], encode: Callable
) -> tuple[list[int], dict[int, ImageReject]]:
    """Per row: the positions its pictures add beyond their marks (each picture's place is one id in the
    data stage's ids, rmspec.vision.marks; the collator splices the processor's expansion of the image part
    there: the image part's tokens, ``encode``: a batch of texts -> ids, special tokens read as such, plus
    what the processor adds), and the rows one of whose images the processor refuses (by index, with the
    reason). ``counter``: a :class:`VisualCount` or rmspec.vision.measured.MeasuredCount (``image_text``,
    ``row_tokens(refs)``). ``prompt_texts`` and ``prompt_lengths`` are not needed (kept for callers)."""
    out = [0] * len(refs)
    refused: dict[int, ImageReject] = {}
    part = None
    for i, row in enumerate(refs):
        if row:
            try:
                added = counter.row_tokens(row).added
            except ImageReject as exc:
                refused[i] = exc
                continue
            if part is None:
                part = len(encode([counter.image_text])[0])
            out[i] = len(row) * (part - 1) + added
    return out, refused


@dataclass(frozen=True)
class VisualCount:
    """How many positions a row's images add to the sequence the language model reads, by the
    Qwen2-VL family's rule (exact, and cheap: the image's size from its header).

    The data stage tokenizes each image as one picture id (rmspec.vision.marks); the collator
    (rmspec.vision.collate) splices the processor's expansion of ``image_text`` there: its one
    image-pad token becomes the image's visual tokens. :func:`extra_positions` counts that difference
    exactly by encoding the prompt as the collator will see it. Other families are measured with
    their processor (rmspec.vision.measured, data stage only)."""

    settings: VisualSettings
    image_text: str = QWEN_IMAGE_TEXT
    placeholder: str = PICTURE  # a picture's place in the decoded prompt (rmspec.vision.marks)

    def image_tokens(self, ref: str) -> ImageTokens:
        width, height = image_size(ref)
        if max(width, height) > MAX_ASPECT_RATIO * min(width, height):  # the processor raises: refuse the row
            raise ImageReject(
                "processor_refused",
                f"{width}x{height}: absolute aspect ratio must be smaller than {MAX_ASPECT_RATIO} (the processor's "
                "smart_resize refuses it); crop or pad the image",
            )
        tokens = self.settings.tokens(width, height)
        return ImageTokens(tokens, tokens - 1)  # its one <|image_pad|> becomes the tokens

    def row_tokens(self, refs: list[str]) -> ImageTokens:
        """A row's images together (each image on its own in this family); a refusal names the image."""
        counted = []
        for k, ref in enumerate(refs):
            try:
                counted.append(self.image_tokens(ref))
            except ImageReject as exc:
                raise ImageReject(exc.reason, f"images[{k}] {exc.detail}") from None
        return ImageTokens(sum(t.visual for t in counted), sum(t.added for t in counted))

    def per_image(self, refs: list[str]) -> list[int]:
        return [self.image_tokens(ref).visual for ref in refs]

    def extra(
        self, prompt_texts: list[str], prompt_lengths: list[int], refs: list[list[str]], encode: Callable
    ) -> list[int]:
        return extra_positions(self, prompt_texts, prompt_lengths, refs, encode)[0]


def visual_count(
    model_dir: str | Path | None, vision: Any = None, image_text: str = QWEN_IMAGE_TEXT
) -> VisualCount | None:
    """What the max_length filter counts per image for this model (None: no Qwen2-VL-style processor
    settings in the folder, so images are counted as their placeholder's tokens). ``image_text``: the
    model family's image part (rmspec.data.tokenize reads it from rmspec.vision.processor.IMAGE_TEXT)."""
    settings = run_settings(model_dir, vision)
    return None if settings is None else VisualCount(settings, image_text)


def image_size(reference: str) -> tuple[int, int]:
    """(width, height) of a checked image reference, from its header."""
    return image_header(reference)[0]


def image_header(reference: str) -> tuple[tuple[int, int], tuple[str, ...]]:
    """(width, height) of a checked image reference (a file, or a data: URI) and what of it rmspec reads as
    stored where vLLM would not (rmspec.vision.images.stored_differently), from its header: no pixel decoded."""
    import io

    from PIL import Image  # here, not at the top: the planner reads settings_of without Pillow

    from rmspec.vision.images import encoded_image, stored_differently

    source: Any = io.BytesIO(encoded_image(reference)[0]) if reference.startswith("data:") else reference
    with Image.open(source) as image:
        return image.size, stored_differently(image)


def read_as_stored_note(counts: dict[str, int]) -> str:
    """The data report's note on the pictures rmspec reads as stored (summary's ``read_as_stored``)."""
    found = ", ".join(
        f"{n:,} with {'an EXIF rotation' if r == 'exif_rotation' else 'transparency'}" for r, n in counts.items()
    )
    return (
        f"images: {found}, read as stored (no rotation applied; transparent pixels as the colours under them), "
        "as in training, scoring and serving; vLLM and transformers' load_image rotate such pictures and vLLM "
        "paints transparent pixels white, so rotate or flatten the files to train on what a viewer shows "
        "(rmspec's multimodal guide: the pixels a picture is read as)"
    )


def summary(images_per_row: list[list[str]], settings: VisualSettings | None, counter: Any = None) -> dict[str, Any]:
    """The data report's images section: images per row, sizes, visual tokens per row (with settings,
    or ``counter``: the data stage's count, rmspec.data.source_stage.Context.visual, which measures
    the families the Qwen2-VL rule does not cover with their processor)."""
    counts = [len(refs) for refs in images_per_row]
    headers = [image_header(ref) for refs in images_per_row for ref in refs]
    sizes = [size for size, _ in headers]
    out: dict[str, Any] = {
        "rows": len(counts),
        "rows_with_images": sum(1 for n in counts if n),
        "images": len(sizes),
        "images_per_row": {
            "mean": round(statistics.fmean(counts), 3) if counts else 0.0,
            "max": max(counts, default=0),
        },
    }
    stored = Counter(reason for _, reasons in headers for reason in reasons)
    if stored:  # pictures vLLM would read otherwise (read_as_stored_note)
        out["read_as_stored"] = dict(sorted(stored.items()))
    if sizes:
        widths, heights = [w for w, _ in sizes], [h for _, h in sizes]
        out["width"] = {"min": min(widths), "median": statistics.median(widths), "max": max(widths)}
        out["height"] = {"min": min(heights), "median": statistics.median(heights), "max": max(heights)}
    if settings is None and counter is None:
        return out
    if counter is not None and not isinstance(counter, VisualCount):  # measured by the family's processor
        per_row = [counter.row_tokens(refs).visual if refs else 0 for refs in images_per_row]
    else:
        assert settings is not None
        per_row, k = [], 0
        for n in counts:
            per_row.append(sum(settings.tokens(*sizes[j]) for j in range(k, k + n)))
            k += n
    out["visual_tokens_per_row"] = {
        "mean": round(statistics.fmean(per_row), 2) if per_row else 0.0,
        "max": max(per_row, default=0),
    }
    if counter is not None and not isinstance(counter, VisualCount):
        out["processor"] = counter.describe()
    elif settings is not None:
        out["processor"] = {
            "patch_size": settings.patch_size,
            "merge_size": settings.merge_size,
            "min_pixels": settings.min_pixels,
            "max_pixels": settings.max_pixels,
        }
    return out
