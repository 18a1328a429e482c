"""Tiny reward models for the serve tests, built here with nothing fetched: a Qwen2 with a
byte-level BPE tokenizer and Qwen2.5's ChatML template (`<|im_end|>` EOS, no BOS), a Llama with
Llama-3's template and special tokens (the template writes the BOS and the tokenizer adds one
with add_special_tokens), and the encoder (tests/test_serve_protocols.build_spread_bert).
Their score heads are scaled so that texts (and reading positions) differ by whole units."""

from __future__ import annotations

from pathlib import Path

QWEN_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
CORPUS = [
    "What colour is the sky? Blue, on a clear day. Add 2 and 2. 4 Tell me about rivers in one long sentence please.",
    "Rivers carry water from high ground to the sea, shaping valleys and feeding towns along the way.",
    "hi hello bye? goodbye Short. Yes. You are Qwen, a helpful assistant. Be brief. system user assistant",
    "The quick brown fox jumps over the lazy dog. 0123456789 !?.,;:'\"()[]{}<>-+=*/\\ \n\n\t",
]


def _bpe(special: list[str], extra: list[str] | None = None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 3 + (extra or []), trainer)
    return tok


def _spread(model, seed: int, scale: float = 1.0):
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        model.score.weight.normal_(0.0, scale)
    return model


def build_qwen2_chatml(directory: Path, *, hidden_size: int = 32, intermediate_size: int = 64) -> Path:
    """hidden_size 128 gives head_dim 64 (2 heads), what vLLM's CPU attention needs (it refuses 16)."""
    import transformers

    tok = _bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    fast.chat_template = QWEN_TEMPLATE
    config = transformers.Qwen2Config(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=intermediate_size,
        max_position_embeddings=512,
        num_labels=1,
        pad_token_id=fast.pad_token_id,
        eos_token_id=fast.eos_token_id,
    )
    import torch

    torch.manual_seed(5)
    model = _spread(transformers.Qwen2ForSequenceClassification(config), 6)
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def build_llama3(directory: Path, *, hidden_size: int = 32, intermediate_size: int = 64) -> Path:
    """hidden_size 128 gives head_dim 64 (2 heads), what vLLM's CPU attention needs (it refuses 16)."""
    import transformers
    from tokenizers import processors

    special = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok = _bpe(special)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B", special_tokens=[("<|begin_of_text|>", bos)]
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
        additional_special_tokens=special[2:],
    )
    fast.chat_template = LLAMA3_TEMPLATE
    config = transformers.LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=intermediate_size,
        max_position_embeddings=512,
        num_labels=1,
        pad_token_id=fast.pad_token_id,
        bos_token_id=bos,
        eos_token_id=fast.eos_token_id,
    )
    import torch

    torch.manual_seed(7)
    model = _spread(transformers.LlamaForSequenceClassification(config), 8)
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def metric(text: bytes, name: str, **labels: str) -> float:
    """The sum of a Prometheus sample (/metrics text) over the samples with these labels."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total
