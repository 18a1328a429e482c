"""The image processor a VLM reward model reads its images with, loaded without torchvision.

``AutoProcessor`` of a Qwen2-VL family checkpoint needs torchvision (its video processor); where
that fails, the processor is rebuilt from ``AutoImageProcessor`` (Pillow backend) and the run's
tokenizer as :class:`rmspec.vision.tiny.processor_class` (image processor + tokenizer only).
Resolution options (``min_pixels`` / ``max_pixels``) are applied here, once, for every stage.
"""

from __future__ import annotations

from typing import Any

from rmspec.vision.images import IMAGE_PLACEHOLDER

#: How one image part is written in the text the processor expands, per model family (the chat
#: template's rendering of {"type": "image"}); the processor turns it into the image's tokens.
IMAGE_TEXT = {
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "qwen2_5_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "qwen3_vl": "<|vision_start|><|image_pad|><|vision_end|>",
}


def is_vision_config(config: Any) -> bool:
    """A VLM: its config has a vision tower."""
    return getattr(config, "vision_config", None) is not None


def load_processor(
    model_path: str, tokenizer: Any, min_pixels: int | None = None, max_pixels: int | None = None
) -> Any:
    from transformers import AutoImageProcessor

    resolution = {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v is not None}
    image_processor = AutoImageProcessor.from_pretrained(model_path, **resolution)
    from rmspec.vision.tiny import processor_class

    return processor_class()(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )


def image_text(config: Any, processor: Any) -> str:
    """The text one image part becomes (see IMAGE_TEXT); else the processor's image token."""
    return IMAGE_TEXT.get(config.model_type) or processor.image_token


def expand_placeholders(text: str, image_part: str) -> str:
    """The data stage's ``<image>`` placeholders written as the model's image parts."""
    return text.replace(IMAGE_PLACEHOLDER, image_part)
