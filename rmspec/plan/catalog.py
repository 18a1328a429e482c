"""Built-in shapes of popular models: the keys of their real config.json files.

Used when a model is neither a local folder nor in the local Hugging Face cache, so that
`rmspec plan` works offline for hub models. Names match without the organisation and without
the chat/instruct suffix (Qwen/Qwen2.5-7B-Instruct -> qwen2.5-7b).
"""

from __future__ import annotations

import re


def _llama(h, layers, heads, kv, inter, vocab=128256, tie=False, head_dim=None):
    cfg = dict(
        model_type="llama",
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=tie,
    )
    if head_dim:
        cfg["head_dim"] = head_dim
    return cfg


def _qwen2(h, layers, heads, kv, inter, vocab, tie):
    return dict(
        model_type="qwen2",
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=tie,
    )


def _qwen3(h, layers, heads, kv, inter, tie):
    return dict(
        model_type="qwen3",
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=128,
        intermediate_size=inter,
        vocab_size=151936,
        tie_word_embeddings=tie,
    )


def _gemma2(h, layers, heads, kv, head_dim, inter):
    return dict(
        model_type="gemma2",
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=256000,
        tie_word_embeddings=True,
    )


def _bert(h, layers, heads, inter, vocab=30522):
    return dict(
        model_type="bert",
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
        vocab_size=vocab,
        max_position_embeddings=512,
        type_vocab_size=2,
    )


def _deberta_v3(h, layers, heads, inter):
    return dict(
        model_type="deberta-v2",
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
        vocab_size=128100,
        max_position_embeddings=512,
        type_vocab_size=0,
        relative_attention=True,
        position_buckets=256,
        position_biased_input=False,
    )


CATALOG: dict[str, dict] = {
    # Llama 3.x (meta-llama): 3.2 1B/3B tie their embeddings, 8B/70B do not.
    "llama-3.2-1b": _llama(2048, 16, 32, 8, 8192, tie=True, head_dim=64),
    "llama-3.2-3b": _llama(3072, 28, 24, 8, 8192, tie=True, head_dim=128),
    "llama-3.1-8b": _llama(4096, 32, 32, 8, 14336),
    "llama-3-8b": _llama(4096, 32, 32, 8, 14336),
    "llama-3.1-70b": _llama(8192, 80, 64, 8, 28672),
    "llama-3.3-70b": _llama(8192, 80, 64, 8, 28672),
    "llama-3-70b": _llama(8192, 80, 64, 8, 28672),
    # Qwen2.5 (q/k/v biases; up to 3B tie their embeddings)
    "qwen2.5-0.5b": _qwen2(896, 24, 14, 2, 4864, 151936, True),
    "qwen2.5-1.5b": _qwen2(1536, 28, 12, 2, 8960, 151936, True),
    "qwen2.5-3b": _qwen2(2048, 36, 16, 2, 11008, 151936, True),
    "qwen2.5-7b": _qwen2(3584, 28, 28, 4, 18944, 152064, False),
    "qwen2.5-14b": _qwen2(5120, 48, 40, 8, 13824, 152064, False),
    "qwen2.5-32b": _qwen2(5120, 64, 40, 8, 27648, 152064, False),
    "qwen2.5-72b": _qwen2(8192, 80, 64, 8, 29568, 152064, False),
    # Qwen3 (q/k norms, head_dim 128)
    "qwen3-0.6b": _qwen3(1024, 28, 16, 8, 3072, True),
    "qwen3-1.7b": _qwen3(2048, 28, 16, 8, 6144, True),
    "qwen3-4b": _qwen3(2560, 36, 32, 8, 9728, True),
    "qwen3-8b": _qwen3(4096, 36, 32, 8, 12288, False),
    "qwen3-14b": _qwen3(5120, 40, 40, 8, 17408, False),
    "qwen3-32b": _qwen3(5120, 64, 64, 8, 25600, False),
    # Mistral 7B (v0.1/v0.2 vocab 32000; v0.3 32768)
    "mistral-7b-v0.1": _llama(4096, 32, 32, 8, 14336, vocab=32000) | {"model_type": "mistral"},
    "mistral-7b-v0.2": _llama(4096, 32, 32, 8, 14336, vocab=32000) | {"model_type": "mistral"},
    "mistral-7b-v0.3": _llama(4096, 32, 32, 8, 14336, vocab=32768) | {"model_type": "mistral"},
    "mistral-7b": _llama(4096, 32, 32, 8, 14336, vocab=32768) | {"model_type": "mistral"},
    # Gemma 2 (four norms per block, tied embeddings, 256k vocabulary)
    "gemma-2-2b": _gemma2(2304, 26, 8, 4, 256, 9216),
    "gemma-2-9b": _gemma2(3584, 42, 16, 8, 256, 14336),
    "gemma-2-27b": _gemma2(4608, 46, 32, 16, 128, 36864),
    # Phi-3 / Phi-4 (fused qkv and gate_up in the checkpoint; same counts)
    "phi-3-mini-4k": dict(
        model_type="phi3",
        hidden_size=3072,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        intermediate_size=8192,
        vocab_size=32064,
        tie_word_embeddings=False,
    ),
    "phi-3-mini-128k": dict(
        model_type="phi3",
        hidden_size=3072,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        intermediate_size=8192,
        vocab_size=32064,
        tie_word_embeddings=False,
    ),
    "phi-3-medium-4k": dict(
        model_type="phi3",
        hidden_size=5120,
        num_hidden_layers=40,
        num_attention_heads=40,
        num_key_value_heads=10,
        intermediate_size=17920,
        vocab_size=32064,
        tie_word_embeddings=False,
    ),
    "phi-3.5-mini": dict(
        model_type="phi3",
        hidden_size=3072,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        intermediate_size=8192,
        vocab_size=32064,
        tie_word_embeddings=False,
    ),
    "phi-4": dict(
        model_type="phi3",
        hidden_size=5120,
        num_hidden_layers=40,
        num_attention_heads=40,
        num_key_value_heads=10,
        intermediate_size=17920,
        vocab_size=100352,
        tie_word_embeddings=False,
    ),
    "phi-4-mini": dict(
        model_type="phi3",
        hidden_size=3072,
        num_hidden_layers=32,
        num_attention_heads=24,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=200064,
        tie_word_embeddings=True,
    ),
    # Encoders
    "bert-base-uncased": _bert(768, 12, 12, 3072),
    "bert-base-cased": _bert(768, 12, 12, 3072, vocab=28996),
    "bert-large-uncased": _bert(1024, 24, 16, 4096),
    "bert-large-cased": _bert(1024, 24, 16, 4096, vocab=28996),
    "deberta-v3-xsmall": _deberta_v3(384, 12, 6, 1536),
    "deberta-v3-small": _deberta_v3(768, 6, 12, 3072),
    "deberta-v3-base": _deberta_v3(768, 12, 12, 3072),
    "deberta-v3-large": _deberta_v3(1024, 24, 16, 4096),
    "all-minilm-l6-v2": _bert(384, 6, 12, 1536),
    "all-minilm-l12-v2": _bert(384, 12, 12, 1536),
}

_SUFFIXES = re.compile(r"-(instruct|it|chat|base|hf)(-\d+)?$")


def candidates(name: str) -> list[str]:
    """'meta-llama/Meta-Llama-3.1-8B-Instruct' -> ['meta-llama-3.1-8b-instruct', ..., 'llama-3.1-8b']."""
    key = name.rstrip("/").split("/")[-1].lower()
    out = [key]
    while True:
        stripped = _SUFFIXES.sub("", key)
        if stripped == key:
            break
        key = stripped
        out.append(key)
    out += [re.sub(r"-(instruct|chat|it)(?=-)", "", k) for k in out]  # Mistral-7B-Instruct-v0.3
    out += [k[len("meta-") :] for k in out if k.startswith("meta-llama-")]
    return out


def catalog_config(name: str) -> tuple[str, dict] | None:
    for key in candidates(name):
        if key in CATALOG:
            return key, CATALOG[key]
    return None
