"""A tiny Qwen2-VL reward model built offline, for tests, the demo and the benchmarks.

Nothing comes from the Hub and torchvision is not needed (REFERENCE section 16):

- the tokenizer is a byte-level Qwen2 tokenizer over the 256 byte characters plus Qwen2-VL's
  special tokens, with no merges (every byte is one token);
- the image processor is ``Qwen2VLImageProcessorPil`` (Pillow, not torchvision);
- the stock ``Qwen2VLProcessor`` insists on a video processor that needs torchvision, so
  :class:`ImageTextProcessor` is a subclass whose parts are the image processor and the tokenizer;
- the model is :func:`rmspec.vision.models.reward_class` of a small ``Qwen2VLConfig``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2-VL's layout without its default system turn: an image part renders as
# <|vision_start|><|image_pad|><|vision_end|>, which the processor expands to the image's tokens.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Pixels the tiny processor resizes every image to at least / at most: 64x64 is 4 visual tokens.
MIN_PIXELS = 784
MAX_PIXELS = 4096


def processor_class() -> Any:
    """``Qwen2VLProcessor`` without its video processor (which needs torchvision), registered."""
    global _PROCESSOR_CLASS
    if _PROCESSOR_CLASS is None:
        from transformers import AutoProcessor, Qwen2VLConfig
        from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor

        class ImageTextProcessor(Qwen2VLProcessor):
            def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
                super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

        # ProcessorMixin reads its parts from __init__'s signature: image processor and tokenizer.
        ImageTextProcessor.__module__ = __name__
        AutoProcessor.register(Qwen2VLConfig, ImageTextProcessor, exist_ok=True)
        _PROCESSOR_CLASS = ImageTextProcessor
    return _PROCESSOR_CLASS


_PROCESSOR_CLASS: Any = None


def build_tokenizer() -> Any:
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {char: i for i, char in enumerate(alphabet)}
    for token in SPECIAL_TOKENS:
        vocab[token] = len(vocab)
    # eos is <|im_end|> as in Qwen2-VL: a pad equal to eos would make rmspec add a pad token (and grow the vocabulary).
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=[], unk_token="<|endoftext|>", pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_processor(min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS) -> Any:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    image_processor = Qwen2VLImageProcessorPil(min_pixels=min_pixels, max_pixels=max_pixels)
    return processor_class()(image_processor=image_processor, tokenizer=build_tokenizer(), chat_template=CHAT_TEMPLATE)


def tiny_config(
    tokenizer: Any, hidden: int = 64, layers: int = 2, vision_depth: int = 2, vision_width: int = 32
) -> Any:
    from transformers import Qwen2VLConfig

    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    # M-RoPE splits half a head's dimensions into time, height and width sections ([2, 3, 3] at hidden 64).
    half = hidden // 4 // 2
    time_dims = half // 4
    section = [time_dims, (half - time_dims) // 2, half - time_dims - (half - time_dims) // 2]
    return Qwen2VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "intermediate_size": hidden * 2,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section},
            "pad_token_id": ids["<|endoftext|>"],
            "bos_token_id": None,
            "eos_token_id": ids["<|im_end|>"],
        },
        vision_config={
            "depth": vision_depth,
            "embed_dim": vision_width,
            "hidden_size": hidden,
            "num_heads": 2,
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        num_labels=1,
    )


def build_tiny_vlm(directory: str | Path, seed: int = 0, **shape: int) -> Path:
    """Write a tiny Qwen2-VL reward checkpoint and its processor to ``directory``; return it."""
    import torch

    from rmspec.vision.models import reward_class

    directory = Path(directory)
    processor = build_processor()
    config = tiny_config(processor.tokenizer, **shape)
    torch.manual_seed(seed)
    model = reward_class(config)(config)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def build_tiny_generation_vlm(directory: str | Path, seed: int = 0, **shape: int) -> Path:
    """The same shape as a ``Qwen2VLForConditionalGeneration`` (a base checkpoint, Hub layout)."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    directory = Path(directory)
    processor = build_processor()
    config = tiny_config(processor.tokenizer, **shape)
    torch.manual_seed(seed)
    Qwen2VLForConditionalGeneration(config).save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory
