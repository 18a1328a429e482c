"""Reward heads on vision-language models.

A VLM whose transformers package ships a ``*ForSequenceClassification`` (Gemma 3, Qwen3.5) uses
that class. For the others (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, ...), :func:`reward_class` builds a
class on transformers' own generic head (``score = Linear(hidden, 1, bias=False)`` read at the last
non-pad token, exactly what rmspec reads for text rewards) and registers it so that the saved
model loads in plain transformers through ``AutoModelForSequenceClassification``.

Two traps make this more than a one-line subclass (REFERENCE section 16):

1. A class defined outside transformers gets no checkpoint key conversion, so a Hub checkpoint
   (``model.layers.*``, ``visual.*``) loads its whole language model at random init with only a
   load-report warning. :func:`reward_class` registers the ``*ForConditionalGeneration`` class's
   conversion mapping under the new class's name.
2. ``AutoModelForSequenceClassification.register`` ignores a second registration unless
   ``exist_ok=True``.
"""

from __future__ import annotations

from typing import Any

#: model_type -> the ForConditionalGeneration class whose base and conversion the reward class reuses.
_GENERATION_CLASSES = {
    "qwen2_vl": "Qwen2VLForConditionalGeneration",
    "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
    "qwen3_vl": "Qwen3VLForConditionalGeneration",
}

_BUILT: dict[str, Any] = {}


def reward_class(config: Any) -> Any:
    """The sequence-classification class for ``config``: transformers' own, or one built here."""
    import transformers
    from transformers import AutoModelForSequenceClassification
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    model_type = config.model_type
    own = MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES.get(model_type)
    if own and model_type not in _BUILT:
        return getattr(transformers, own)
    if model_type in _BUILT:
        return _BUILT[model_type]
    generation = _GENERATION_CLASSES.get(model_type)
    if generation is None:
        raise ValueError(
            f"no reward head for model_type {model_type!r}: transformers ships no "
            f"{model_type} sequence-classification class and rmspec knows no "
            f"ForConditionalGeneration class for it (known: {', '.join(sorted(_GENERATION_CLASSES))})"
        )
    cls = _build(model_type, generation)
    AutoModelForSequenceClassification.register(type(config), cls, exist_ok=True)
    _BUILT[model_type] = cls
    return cls


def _build(model_type: str, generation: str) -> Any:
    import importlib

    import transformers
    from transformers.conversion_mapping import (
        get_checkpoint_conversion_mapping,
        register_checkpoint_conversion_mapping,
    )
    from transformers.modeling_layers import GenericForSequenceClassification

    gen_cls = getattr(transformers, generation)
    module = importlib.import_module(gen_cls.__module__)
    pretrained = next(base for base in gen_cls.__mro__ if base.__name__.endswith("PreTrainedModel"))
    name = generation.replace("ForConditionalGeneration", "ForSequenceClassification")
    cls = type(name, (GenericForSequenceClassification, pretrained), {"__module__": module.__name__})
    mapping = get_checkpoint_conversion_mapping(generation) or get_checkpoint_conversion_mapping(model_type)
    if mapping:
        register_checkpoint_conversion_mapping(name, mapping, overwrite=True)
    return cls


def card_snippet(model_type: str, path: str = "PATH") -> str:
    """Python that loads a saved VLM reward model in plain transformers (the model card's Use section).

    transformers' own class needs nothing; a class built by :func:`reward_class` is rebuilt in
    ten lines, with the same conversion mapping (without it the language model loads at random)."""
    generation = _GENERATION_CLASSES.get(model_type)
    if generation is None:
        return (
            "from transformers import AutoModelForSequenceClassification\n"
            f'model = AutoModelForSequenceClassification.from_pretrained("{path}")\n'
        )
    name = generation.replace("ForConditionalGeneration", "ForSequenceClassification")
    config = _CONFIG_CLASSES[model_type]
    module = f"transformers.models.{model_type}.modeling_{model_type}"
    pretrained = generation.replace("ForConditionalGeneration", "PreTrainedModel")
    return (
        f"from transformers import AutoModelForSequenceClassification, {config}\n"
        "from transformers.conversion_mapping import (\n"
        "    get_checkpoint_conversion_mapping, register_checkpoint_conversion_mapping)\n"
        "from transformers.modeling_layers import GenericForSequenceClassification\n"
        f"from {module} import {pretrained}\n\n"
        f"class {name}(GenericForSequenceClassification, {pretrained}):\n"
        "    pass\n\n"
        "# Without the mapping the checkpoint's language model would load at random init.\n"
        f'register_checkpoint_conversion_mapping("{name}",\n'
        f'    get_checkpoint_conversion_mapping("{generation}"), overwrite=True)\n'
        f"AutoModelForSequenceClassification.register({config}, {name}, exist_ok=True)\n"
        f'model = AutoModelForSequenceClassification.from_pretrained("{path}")\n'
        "# reward = model(**processor(text=..., images=..., return_tensors='pt')).logits[:, 0]\n"
    )


_CONFIG_CLASSES = {
    "qwen2_vl": "Qwen2VLConfig",
    "qwen2_5_vl": "Qwen2_5_VLConfig",
    "qwen3_vl": "Qwen3VLConfig",
}


def card_use(config: Any) -> tuple[str, ...] | None:
    """The model card's Use section for a VLM reward model (None for a text model: its kind's own)."""
    if getattr(config, "vision_config", None) is None:
        return None
    return (
        "Load it in plain transformers (images through the base model's processor):",
        "",
        "```python",
        *card_snippet(config.model_type, "PATH").splitlines(),
        "```",
    )
