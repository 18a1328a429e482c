"""Reward heads on vision-language models.

A VLM whose transformers package ships a ``*ForSequenceClassification`` (Gemma 3, Qwen3.5) uses
that class. For any other model type with a vision tower and an image-text-to-text class in the
installed transformers (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, LLaVA, LLaVA-OneVision, Idefics3, SmolVLM,
PaliGemma, Mistral 3, ...), :func:`reward_class` builds a class on transformers' own generic head
(``score = Linear(text hidden, 1, bias=False)`` read at the last token that is not the text
config's pad id, exactly what rmspec reads for text rewards) over the family's ``PreTrainedModel``,
and registers it so that the saved model loads in plain transformers through
``AutoModelForSequenceClassification``. The generic head reads ``hidden_size`` and ``pad_token_id``
from ``config.get_text_config()``, so LLaVA-like configs that keep them in ``text_config`` work.

Two traps make this more than a one-line subclass (REFERENCE section 16):

1. A class defined outside transformers gets no checkpoint key conversion, so a Hub checkpoint
   (``model.layers.*``, ``visual.*``; LLaVA's ``language_model.model.*``) loads its whole language
   model at random init with only a load-report warning. :func:`reward_class` registers the
   ``*ForConditionalGeneration`` class's conversion mapping (or its model type's) under the new
   class's name.
2. ``AutoModelForSequenceClassification.register`` ignores a second registration unless
   ``exist_ok=True``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_BUILT: dict[str, Any] = {}


@dataclass(frozen=True)
class RewardSource:
    """What a reward class for ``model_type`` is built from, all named as transformers names them."""

    model_type: str
    config: str  # the config class (LlavaConfig)
    generation: str  # the image-text-to-text class (LlavaForConditionalGeneration)
    pretrained: str  # its PreTrainedModel base (LlavaPreTrainedModel)
    module: str  # where that base lives (transformers.models.llava.modeling_llava)
    mapping_key: str | None  # the conversion mapping's key: the generation class, or the model type

    @property
    def name(self) -> str:
        stem = self.generation.removesuffix("ForConditionalGeneration")
        return f"{stem}ForSequenceClassification"


def own_class(model_type: str) -> str | None:
    """transformers' own sequence-classification class for ``model_type`` (None where it ships none)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    return MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES.get(model_type)


def reward_source(model_type: str) -> RewardSource:
    """The family classes a reward head for ``model_type`` is built on, read from transformers' auto
    mappings (image-text-to-text, then vision-to-sequence); a ValueError saying why where there are none."""
    import importlib

    import transformers
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    names = getattr(modeling_auto, "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", {})
    generation = names.get(model_type) or getattr(modeling_auto, "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES", {}).get(
        model_type
    )
    if not generation or model_type not in modeling_auto.MODEL_MAPPING_NAMES:
        raise ValueError(
            f"no reward head for model_type {model_type!r}: transformers {transformers.__version__} has no "
            f"{model_type} sequence-classification class and no image-text-to-text class with a base model "
            "to put rmspec's score head on (pick a vision-language model that transformers' "
            "AutoModelForImageTextToText loads, or upgrade transformers)"
        )
    gen_cls = getattr(transformers, generation)
    pretrained = next(
        base
        for base in gen_cls.__mro__
        if base.__name__.endswith("PreTrainedModel") and base.__name__ != "PreTrainedModel"
    )
    module = importlib.import_module(gen_cls.__module__)
    key = next((k for k in (generation, model_type) if get_checkpoint_conversion_mapping(k)), None)
    return RewardSource(
        model_type, CONFIG_MAPPING_NAMES[model_type], generation, pretrained.__name__, module.__name__, key
    )


def reward_class(config: Any) -> Any:
    """The sequence-classification class for ``config``: transformers' own, or one built here."""
    import transformers
    from transformers import AutoModelForSequenceClassification

    model_type = config.model_type
    if model_type in _BUILT:
        return _BUILT[model_type]
    own = own_class(model_type)
    if own:
        return getattr(transformers, own)
    cls = _build(reward_source(model_type))
    AutoModelForSequenceClassification.register(type(config), cls, exist_ok=True)
    _BUILT[model_type] = cls
    return cls


def _build(source: RewardSource) -> Any:
    import importlib

    from transformers.conversion_mapping import (
        get_checkpoint_conversion_mapping,
        register_checkpoint_conversion_mapping,
    )
    from transformers.modeling_layers import GenericForSequenceClassification

    pretrained = getattr(importlib.import_module(source.module), source.pretrained)
    # Defined in the family's module so transformers treats it as its own code (not remote code).
    cls = type(source.name, (GenericForSequenceClassification, pretrained), {"__module__": source.module})
    if source.mapping_key:
        mapping = get_checkpoint_conversion_mapping(source.mapping_key)
        register_checkpoint_conversion_mapping(source.name, mapping, overwrite=True)
    return cls


def card_snippet(model_type: str, path: str = "PATH") -> str:
    """Python that loads a saved VLM reward model in plain transformers (the model card's Use section).

    transformers' own class needs nothing; a class built by :func:`reward_class` is rebuilt in
    ten lines, with the same conversion mapping (without it the language model loads at random)."""
    if own_class(model_type):
        return (
            "from transformers import AutoModelForSequenceClassification\n"
            f'model = AutoModelForSequenceClassification.from_pretrained("{path}")\n'
        )
    source = reward_source(model_type)
    name = source.name
    mapping = (
        "# Without the mapping the checkpoint's language model would load at random init.\n"
        f'register_checkpoint_conversion_mapping("{name}",\n'
        f'    get_checkpoint_conversion_mapping("{source.mapping_key}"), overwrite=True)\n'
        if source.mapping_key
        else ""
    )
    return (
        f"from transformers import AutoModelForSequenceClassification, {source.config}\n"
        "from transformers.conversion_mapping import (\n"
        "    get_checkpoint_conversion_mapping, register_checkpoint_conversion_mapping)\n"
        "from transformers.modeling_layers import GenericForSequenceClassification\n"
        f"from {source.module} import {source.pretrained}\n\n"
        f"class {name}(GenericForSequenceClassification, {source.pretrained}):\n"
        "    pass\n\n"
        f"{mapping}"
        f"AutoModelForSequenceClassification.register({source.config}, {name}, exist_ok=True)\n"
        f'model = AutoModelForSequenceClassification.from_pretrained("{path}")\n'
        "# reward = model(**processor(text=..., images=..., return_tensors='pt')).logits[:, 0]\n"
    )


def processor_snippet(path: str = "PATH", picture: str = "PICTURE") -> str:
    """Python that builds the saved model's processor in plain transformers and scores one picture with
    `model` (after :func:`card_snippet`): the processor training used, from the folder alone
    (rmspec.vision.saved_processor: its image-and-text class, so torchvision is not needed), the
    conversation through its chat template, the reward at the last token."""
    return (
        "import torch\n"
        "from PIL import Image\n"
        "from transformers import AutoProcessor\n\n"
        "# The processor training used: the folder's image processor and tokenizer (processing_image_text.py)\n"
        f'processor = AutoProcessor.from_pretrained("{path}", trust_remote_code=True)\n'
        "messages = [\n"
        '    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in the picture?"}]},\n'
        '    {"role": "assistant", "content": "A red square."},\n'
        "]\n"
        "text = processor.apply_chat_template(messages, tokenize=False)\n"
        f'inputs = processor(text=[text], images=[Image.open("{picture}").convert("RGB")], return_tensors="pt")\n'
        "with torch.no_grad():\n"
        "    reward = model.eval()(**inputs).logits[0, 0].item()\n"
        "print(reward)\n"
    )


def card_use(config: Any) -> tuple[str, ...] | None:
    """The model card's Use section for a VLM reward model (None for a text model: its kind's own)."""
    if getattr(config, "vision_config", None) is None:
        return None
    return (
        "Load it in plain transformers and score one picture (PATH: this folder; PICTURE: an image file):",
        "",
        "```python",
        *card_snippet(config.model_type, "PATH").splitlines(),
        "",
        *processor_snippet("PATH", "PICTURE").splitlines(),
        "```",
    )
