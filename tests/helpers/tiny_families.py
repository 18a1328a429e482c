"""Tiny vision-language checkpoints of several transformers families, built offline (tests only).

Each family is written as its own ``*ForConditionalGeneration`` checkpoint (transformers' on-disk
key layout) with its own processor class, as a user's base model would be: LLaVA (CLIP vision tower,
``<image>`` repeated per patch), LLaVA-OneVision (SigLIP tower, any-resolution tiles and an image
newline), Idefics3 and SmolVLM (image splitting with ``<row_i_col_j>`` / ``<global-img>`` /
``<fake_token_around_image>`` tokens). Nothing comes from the Hub and torchvision is not needed
(the Pillow image processors); shapes are hidden 64, one language layer, one vision layer, images
of 28-56 pixels, so a family's whole test runs in seconds on a CPU.

The tokenizer is rmspec.vision.tiny's byte-level idea (every byte one token, no merges) with the
family's image tokens added as special tokens, and a ChatML template whose image part renders as
``<image>`` (what each of these processors expands).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

CHAT_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

IDEFICS3_TOKENS = [
    "<image>",
    "<fake_token_around_image>",
    "<global-img>",
    "<end_of_utterance>",
    *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
]


def build_tokenizer(image_tokens: list[str], named: dict[str, str] | None = None, image_text: str = "<image>") -> Any:
    """``named``: tokens the family's processor reads as tokenizer attributes (Gemma 3's boi_token, ...)."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer

    vocab = {char: i for i, char in enumerate(sorted(ByteLevel.alphabet()))}
    for token in CHAT_TOKENS + image_tokens:
        vocab[token] = len(vocab)
    # pad differs from eos, as in the real models (a pad equal to eos would make rmspec add one).
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=[],
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        **({"extra_special_tokens": named} if named else {}),
    )
    tokenizer.add_special_tokens({"additional_special_tokens": CHAT_TOKENS[1:] + image_tokens})
    tokenizer.chat_template = CHAT_TEMPLATE.replace("<image>", image_text)
    return tokenizer


def _text(tokenizer: Any, layers: int, hidden: int = 64) -> dict[str, Any]:
    """4 heads of hidden / 4 (hidden 256: head_dim 64, the smallest vLLM's CPU attention takes)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": tokenizer.eos_token_id,
    }


def _vision(model_type: str, image_size: int, **extra: Any) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": image_size,
        "patch_size": 14,
        **extra,
    }


def llava(layers: int = 1) -> tuple[Any, Any]:
    """LLaVA: a CLIP tower at 28 px (2x2 patches and a CLS dropped by the "default" strategy: 4 tokens)."""
    from transformers import LlavaConfig, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tokenizer = build_tokenizer(["<image>"])
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    processor = LlavaProcessor(
        image_processor,
        tokenizer,
        patch_size=14,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )
    config = LlavaConfig(
        text_config={"model_type": "qwen2", **_text(tokenizer, layers)},
        vision_config=_vision("clip_vision_model", 28, projection_dim=32),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        num_labels=1,
    )
    return config, processor


#: LLaVA-OneVision's any-resolution grid, at the tiny tower's 28 px tile.
PINPOINTS = [[28, 28], [28, 56], [56, 28], [56, 56]]


def llava_onevision(layers: int = 1) -> tuple[Any, Any]:
    """LLaVA-OneVision: a SigLIP tower at 28 px, images tiled on PINPOINTS plus the base tile."""
    from transformers import LlavaOnevisionConfig
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorPil,
    )

    from rmspec.vision.processor import family_processor_class

    tokenizer = build_tokenizer(["<image>", "<video>"])
    image_processor = LlavaOnevisionImageProcessorPil(size={"height": 28, "width": 28}, image_grid_pinpoints=PINPOINTS)
    processor = family_processor_class("llava_onevision")(
        image_processor=image_processor,
        tokenizer=tokenizer,
        num_image_tokens=4,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=CHAT_TEMPLATE,
    )
    config = LlavaOnevisionConfig(
        text_config={"model_type": "qwen2", **_text(tokenizer, layers)},
        vision_config=_vision("siglip_vision_model", 28, vision_use_head=False),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=PINPOINTS,
        num_labels=1,
    )
    return config, processor


def _idefics(
    config_cls: Any, processor_cls: Any, image_processor_cls: Any, layers: int, hidden: int = 64
) -> tuple[Any, Any]:
    """Idefics3 / SmolVLM: a 56 px tower, 16 patches pixel-shuffled by 2 into 4 tokens per tile;
    images up to 112 px split into 56 px tiles plus a global view."""
    tokenizer = build_tokenizer(IDEFICS3_TOKENS)
    image_processor = image_processor_cls(size={"longest_edge": 112}, max_image_size={"longest_edge": 56})
    processor = processor_cls(image_processor=image_processor, tokenizer=tokenizer, image_seq_len=4)
    processor.chat_template = CHAT_TEMPLATE
    config = config_cls(
        text_config={"model_type": "llama", **_text(tokenizer, layers, hidden)},
        vision_config={k: v for k, v in _vision("", 56).items() if k != "model_type"},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=1,
    )
    return config, processor


def idefics3(layers: int = 1, hidden: int = 64) -> tuple[Any, Any]:
    from transformers import Idefics3Config, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    return _idefics(Idefics3Config, Idefics3Processor, Idefics3ImageProcessorPil, layers, hidden)


def smolvlm(layers: int = 1) -> tuple[Any, Any]:
    from transformers import SmolVLMConfig
    from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

    from rmspec.vision.processor import family_processor_class

    return _idefics(SmolVLMConfig, family_processor_class("smolvlm"), SmolVLMImageProcessorPil, layers)


GEMMA3_TOKENS = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}


def gemma3(layers: int = 1) -> tuple[Any, Any]:
    """Gemma 3 (transformers ships Gemma3ForSequenceClassification): a SigLIP tower at 28 px whose 2x2
    patches are average-pooled into one soft token; an image part is ``<start_of_image>``, which the
    processor writes as ``\\n\\n<start_of_image><image_soft_token><end_of_image>\\n\\n``."""
    from transformers import Gemma3Config, Gemma3Processor
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    tokenizer = build_tokenizer(list(GEMMA3_TOKENS.values()), GEMMA3_TOKENS, image_text="<start_of_image>")
    image_processor = Gemma3ImageProcessorPil(size={"height": 28, "width": 28})
    processor = Gemma3Processor(image_processor, tokenizer, chat_template=tokenizer.chat_template, image_seq_length=1)
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in GEMMA3_TOKENS.items()}
    config = Gemma3Config(
        text_config={"model_type": "gemma3_text", "head_dim": 16, **_text(tokenizer, layers)},
        vision_config=_vision("siglip_vision_model", 28, vision_use_head=False),
        mm_tokens_per_image=1,
        boi_token_index=ids["boi_token"],
        eoi_token_index=ids["eoi_token"],
        image_token_index=ids["image_token"],
        num_labels=1,
    )
    return config, processor


FAMILIES: dict[str, Callable[..., tuple[Any, Any]]] = {
    "gemma3": gemma3,
    "llava": llava,
    "llava_onevision": llava_onevision,
    "idefics3": idefics3,
    "smolvlm": smolvlm,
}


def build_generation_checkpoint(
    family: str, directory: str | Path, seed: int = 0, layers: int = 1, **shape: Any
) -> Path:
    """Write ``family``'s tiny ``*ForConditionalGeneration`` checkpoint (a base model as the Hub has
    it) with its processor and tokenizer to ``directory``; return it. ``shape``: the family builder's
    own options (Idefics3's ``hidden``)."""
    import torch
    from transformers import AutoModelForImageTextToText

    directory = Path(directory)
    config, processor = FAMILIES[family](layers, **shape)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory
