"""model.vision's resolution options against the model folder's saved image processor, before any GPU-hour.

`min_pixels` / `max_pixels` are settings of the Qwen2-VL family's image processors only; other families
size images by their own names (LLaVA's CLIP ``size`` / ``crop_size``, Idefics3's ``size`` /
``max_image_size``, SigLIP's ``size: {height, width}``), written under ``model.vision.image_processor``.
transformers drops an image processor setting it does not know without a word, so a misspelt one would
train at the checkpoint's resolution. Both are refused here at their line, naming the settings the
folder's image processor has (its saved config's keys).

`rmspec plan` checks a folder on disk (a local folder or the Hugging Face cache) and says the check waits
for the run otherwise; `rmspec run` fetches the few JSON files of a hub model first. Light: json and
pathlib, and huggingface_hub's cache / file download at run start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmspec.errors import SpecError, SpecIssue
from rmspec.spec.base import Problem

#: The families whose image processors take min_pixels / max_pixels (smart_resize by pixel count).
PIXEL_BOUND_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
#: Their settings the light token rule (rmspec.vision.tokens) reads from the folder: set through
#: min_pixels / max_pixels only, so the plan and the data stage count what training makes.
RULE_SETTINGS = ("size", "patch_size", "merge_size", "temporal_patch_size")
FILES = ("config.json", "preprocessor_config.json", "processor_config.json")
#: Saved keys that are not settings a user tunes.
NOT_SETTINGS = ("image_processor_type", "processor_class", "_processor_class", "auto_map")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def saved_settings(folder: Path) -> dict[str, Any] | None:
    """The image processor's saved config (preprocessor_config.json, or transformers 5's
    processor_config.json ``image_processor`` entry); None where the folder has neither."""
    flat = folder / "preprocessor_config.json"
    if flat.is_file():
        return _read(flat)
    nested = _read(folder / "processor_config.json").get("image_processor")
    return nested if isinstance(nested, dict) else None


def problems(vision: Any, folder: Path) -> Iterator[Problem]:
    """(field path, what is wrong, what to write) of each model.vision resolution option the folder's
    image processor does not take."""
    config = _read(folder / "config.json")
    model_type = str(config.get("model_type", "?"))
    saved = saved_settings(folder)
    if saved is None:
        return
    kind = str(saved.get("image_processor_type", "image processor"))
    names = sorted(k for k in saved if k not in NOT_SETTINGS)
    own = ", ".join(names)
    for bound in ("min_pixels", "max_pixels"):
        if getattr(vision, bound, None) is None:
            continue
        if model_type in PIXEL_BOUND_TYPES or bound in saved:
            continue
        yield (
            ("model", "vision", bound),
            f"{kind} ({model_type}) does not resize by a pixel count: min_pixels / max_pixels are settings of the "
            f"Qwen2-VL family's image processors ({', '.join(PIXEL_BOUND_TYPES)})",
            f"remove model.vision.{bound} and set this processor's own settings under model.vision.image_processor "
            f"(its saved settings: {own})",
        )
    for key in getattr(vision, "image_processor", None) or {}:
        if key not in saved or key in NOT_SETTINGS:
            yield (
                ("model", "vision", "image_processor", key),
                f"{kind} ({model_type}) has no setting {key!r} (transformers would drop it without a word)",
                f"use one of its saved settings: {own}",
            )
        elif model_type in PIXEL_BOUND_TYPES and key in RULE_SETTINGS:
            yield (
                ("model", "vision", "image_processor", key),
                f"{key} sizes a Qwen2-VL family image, which the plan and the data stage count from "
                "model.vision.min_pixels / max_pixels and the folder's settings",
                f"remove model.vision.image_processor.{key}; bound the image area with model.vision.min_pixels / "
                "max_pixels",
            )


def model_folder(name: str, base_dir: Path, *, download: bool) -> Path | None:
    """The folder holding the model's config files: a local folder, else the Hugging Face cache, else
    (``download``: run start) the hub's copies of those few JSON files; None where none is reachable."""
    from rmspec.packaged import resolve_model_path

    local = Path(resolve_model_path(name, base_dir))
    if not local.is_absolute():
        local = (base_dir / local).resolve()
    if local.is_dir():
        return local
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings it
        return None
    config = try_to_load_from_cache(name, "config.json")
    if isinstance(config, str):
        return Path(config).parent
    if not download:
        return None
    found = None
    for filename in FILES:
        try:
            found = Path(hf_hub_download(name, filename)).parent
        except Exception:  # absent file (a model without a processor config), offline, unreachable
            continue
    return found


def check_vision(loaded: Any, *, download: bool) -> str | None:
    """A SpecError with each problem at its line in the spec file; else None, or (the folder is not
    on disk) the note that the check waits for the run's start."""
    model = loaded.spec.model
    vision = model.vision
    if vision is None or not (vision.min_pixels or vision.max_pixels or vision.image_processor):
        return None
    if getattr(model, "gguf_file", None):
        return None
    folder = model_folder(model.name_or_path, Path(loaded.base_dir), download=download)
    if folder is None:
        return (
            f"model.vision: {model.name_or_path!r} is not on disk, so its image processor settings are checked "
            "when `rmspec run` starts"
        )
    issues = []
    for path, message, hint in problems(vision, folder):
        where = loaded.locations.find(path)
        issues.append(SpecIssue(".".join(path), message, file=where.file, line=where.line, col=where.col, hint=hint))
    if issues:
        raise SpecError(issues)
    return None
