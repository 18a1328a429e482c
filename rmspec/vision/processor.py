"""The image processor a VLM reward model reads its images with, loaded without torchvision.

The family's own processor class (transformers' ``PROCESSOR_MAPPING_NAMES`` for the config's
model type: ``Qwen2VLProcessor``, ``LlavaProcessor``, ``Idefics3Processor``, ...) is built from the
model folder's image processor (``AutoImageProcessor``: the Pillow backend where torchvision is
missing), the run's tokenizer, and the folder's processor settings (``processor_config.json``:
LLaVA's patch size, Idefics3's image_seq_len, ...). Many of these classes also take a video
processor, which transformers only builds with torchvision, so ``AutoProcessor`` fails without it;
:func:`family_processor_class` is the same class without its video (and audio) parts: rmspec reads
images only. Resolution options (``min_pixels`` / ``max_pixels``, and ``model.vision.image_processor``:
the image processor's own setting names) are applied here, once, for every stage.
"""

from __future__ import annotations

import inspect
from typing import Any

#: How one image part is written in the text the processor expands, per model family (the chat
#: template's rendering of {"type": "image"}); the processor turns it into the image's tokens, which
#: the collator (rmspec.vision.collate) splices where the picture stands. A
#: family not listed writes its processor's ``image_token`` (:func:`image_text`). Light: read by the
#: planner's token count (rmspec.vision.tokens) without transformers.
IMAGE_TEXT = {
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "qwen2_5_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "qwen3_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "llava": "<image>",
    "llava_onevision": "<image>",
    "idefics3": "<image>",  # expanded with image splitting: <fake_token_around_image><row_1_col_1><image>...
    "smolvlm": "<image>",
    "gemma3": "<start_of_image>",  # Gemma 3's processor image_token is its boi token, expanded to the soft tokens
}

#: The parts of a processor rmspec builds: it reads images and text, never videos or audio.
IMAGE_PARTS = ("image_processor", "tokenizer")

_CLASSES: dict[str, Any] = {}


def is_vision_config(config: Any) -> bool:
    """A VLM: its config has a vision tower."""
    return getattr(config, "vision_config", None) is not None


def family_processor_class(model_type: str) -> Any:
    """transformers' processor class for ``model_type``, as a class whose parts are the image
    processor and the tokenizer only (the same class where it has no other parts).

    The subclass keeps the family's ``__init__`` parameters by name (transformers saves and loads a
    processor's settings by reading that signature) and passes None for the video / audio parts."""
    if model_type in _CLASSES:
        return _CLASSES[model_type]
    import transformers
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    name = PROCESSOR_MAPPING_NAMES.get(model_type)
    if not name or not hasattr(transformers, name):
        raise ValueError(
            f"transformers {transformers.__version__} has no processor class for model_type {model_type!r}, "
            "so rmspec cannot turn its images into model inputs"
        )
    base = getattr(transformers, name)
    dropped = [part for part in base.get_attributes() if part not in IMAGE_PARTS]
    cls = base if not dropped else _without(base, dropped)
    _CLASSES[model_type] = cls
    return cls


def _without(base: Any, dropped: list[str]) -> Any:
    """``base`` with an ``__init__`` that lacks the ``dropped`` parts and hands them None."""
    params = [
        p
        for p in inspect.signature(base.__init__).parameters.values()
        if p.name != "self" and p.name not in dropped and p.kind is p.POSITIONAL_OR_KEYWORD
    ]
    defaults = {p.name: None if p.default is p.empty else p.default for p in params}
    # A real signature, not *args: transformers reads the parameter names from __init__'s code object.
    source = (
        f"def __init__(self, {', '.join(f'{p.name}=_defaults[{p.name!r}]' for p in params)}, **kwargs):\n"
        f"    _base.__init__(self, {', '.join(f'{p.name}={p.name}' for p in params)}, "
        f"{', '.join(f'{d}=None' for d in dropped)}, **kwargs)\n"
    )
    namespace: dict[str, Any] = {"_base": base, "_defaults": defaults}
    exec(source, namespace)  # noqa: S102 - source built above from transformers' own parameter names
    # Same name and module: the saved processor_config.json names the family's class, which plain
    # transformers loads (with its video processor) where torchvision is installed.
    return type(base.__name__, (base,), {"__init__": namespace["__init__"], "__module__": base.__module__})


def load_processor(
    model_path: str,
    tokenizer: Any,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    settings: dict[str, Any] | None = None,
) -> Any:
    """The family's processor over ``tokenizer`` (the run's), with the folder's image processor and
    processor settings; ``min_pixels`` / ``max_pixels`` and ``settings`` (model.vision.image_processor:
    the image processor's own setting names, e.g. LLaVA's ``crop_size``, Idefics3's ``max_image_size``)
    where given. The plan refuses a setting the folder's image processor lacks (rmspec.vision.settings_check);
    this refuses it again for a caller that skipped the plan, since transformers drops unknown ones silently."""
    from transformers import AutoConfig, AutoImageProcessor

    model_type = AutoConfig.from_pretrained(model_path).model_type
    cls = family_processor_class(model_type)
    resolution = {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v is not None}
    image_processor = AutoImageProcessor.from_pretrained(model_path)
    accepted = getattr(getattr(image_processor, "valid_kwargs", None), "__annotations__", {})
    unknown = [k for k in resolution if k not in accepted]
    if unknown:
        raise ValueError(
            f"model.vision.{unknown[0]}: {type(image_processor).__name__} ({model_type}) does not resize by a pixel "
            "count; remove model.vision.min_pixels / max_pixels for this model (they apply to the Qwen2-VL family) "
            "and set its own settings under model.vision.image_processor"
        )
    known = set(accepted) | set(image_processor.to_dict())
    unknown = sorted(k for k in settings or {} if k not in known)
    if unknown:
        raise ValueError(
            f"model.vision.image_processor.{unknown[0]}: {type(image_processor).__name__} ({model_type}) has no "
            f"setting {unknown[0]!r}; its settings are {', '.join(sorted(image_processor.to_dict()))}"
        )
    resolution.update(settings or {})
    if resolution:
        image_processor = AutoImageProcessor.from_pretrained(model_path, **resolution)
    processor_settings, _ = cls.get_processor_dict(model_path)
    processor_settings = {k: v for k, v in processor_settings.items() if k not in ("chat_template", "audio_tokenizer")}
    parts = {"image_processor": image_processor, "tokenizer": tokenizer}
    return cls.from_args_and_dict(
        [parts[name] for name in cls.get_attributes()], processor_settings, chat_template=tokenizer.chat_template
    )


def image_text(config: Any, processor: Any) -> str:
    """The text one image part becomes (see IMAGE_TEXT); else the processor's image token."""
    return IMAGE_TEXT.get(config.model_type) or processor.image_token
