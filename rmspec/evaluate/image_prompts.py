"""Benchmark prompts that hold images: one user turn whose image parts carry their checked image.

A benchmark example with images keeps them inside its prompt, in the Hugging Face processor
convention: ``{"type": "image", "image": REF}`` content parts beside ``{"type": "text", ...}`` parts,
where REF is an absolute path or a ``data:`` URI (rmspec.vision.rows.reference). The prompt is then
all a scorer needs: evaluation passes prompts to the engine as for text, and only a scorer kind that
reads images (``ScorerType.reads_images``) accepts them (`require_image_scorer`).

Every image is decoded and checked while the benchmark loads (rmspec.vision.images.decode_image): a
benchmark file whose image is missing or broken stops with a located error (exit 2), since a figure
computed without some of its examples would not be the benchmark's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import DataError


def checked_reference(value: Any, base_dir: str | Path | None, where: str) -> str:
    """An image of a benchmark row as an absolute path or a data: URI, after decoding it once."""
    from rmspec.vision.images import ImageReject, decode_image, describe
    from rmspec.vision.rows import reference

    try:
        image = decode_image(value, base_dir)
    except ImageReject as exc:
        raise DataError(
            f"{where}: image {describe(value)}: {exc.reason}: {exc.detail}",
            "download the benchmark's images next to its file (paths are relative to the file's folder), "
            "or fix the row",
        ) from None
    return reference(value, image, base_dir)


def image_prompt(text: str, images: Sequence[Any], base_dir: str | Path | None, where: str) -> list[dict[str, Any]]:
    """One user turn: the question, then its images (checked), in the order both official scripts
    send them: VL-RewardBench's `inference_hf.py` and Multimodal RewardBench's
    `scripts/1_run_model_as_judge_gpt4o.py` build `[{"type": "text"}, {"type": "image_url"}]`."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [
        {"type": "image", "image": checked_reference(value, base_dir, f"{where}, image {k}")}
        for k, value in enumerate(images)
    ]
    return [{"role": "user", "content": parts}]


def holds_images(prompt: Any) -> bool:
    if not isinstance(prompt, list):
        return False
    return any(
        isinstance(part, dict) and part.get("type") == "image"
        for message in prompt
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for part in message["content"]
    )


def require_image_scorer(engine: Any, benchmark: str, prompts: Sequence[Any]) -> None:
    """Refuse a scorer that reads no images on a benchmark whose prompts hold images (exit 2)."""
    from rmspec.inference import scorers

    if scorers.of(engine).reads_images or not any(holds_images(p) for p in prompts):
        return
    raise DataError(
        f"benchmark {benchmark!r} holds images and this {engine.kind} model reads text only",
        "score it with a vision-language reward model (a run trained on a *ForConditionalGeneration model with images)",
    )
