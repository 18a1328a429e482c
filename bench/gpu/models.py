"""Offline models and data for the GPU measurements: the GPU machine has no network and no hub cache,
so each model is built from rmspec's shape catalog (random weights: memory and speed depend on the
shape only) with a word-level tokenizer, and preference pairs are written at a chosen length."""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = [f"w{i}" for i in range(400)]
TINY = dict(
    model_type="qwen2",
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=512,
    tie_word_embeddings=False,
)


def build_model(name: str, folder: Path) -> Path:
    """A randomly initialised Qwen2 decoder of the catalog's shape ``name`` (or TINY), with a tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config

    if (folder / "config.json").exists():
        return folder
    from rmspec.plan.catalog import CATALOG

    shape = dict(TINY if name == "tiny" else CATALOG[name])
    shape.pop("model_type")
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A <eos>", special_tokens=[("<eos>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>").save_pretrained(folder)
    config = Qwen2Config(**shape, eos_token_id=1, pad_token_id=0, max_position_embeddings=32768)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return folder


def write_pairs(path: Path, n: int, tokens: int, seed: int = 0) -> Path:
    """``n`` pairs of about ``tokens`` tokens per sequence (prompt 3/4, response 1/4): memory is measured
    at the planned length, not at the short rows a toy set would have."""
    rng = random.Random(seed)
    prompt_len, reply_len = max(1, tokens * 3 // 4 - 2), max(1, tokens // 4 - 2)
    with path.open("w") as out:
        for i in range(n):
            words = lambda k: " ".join(rng.choice(WORDS[10:]) for _ in range(k))  # noqa: E731
            row = {
                "id": f"p{i}",
                "prompt": words(prompt_len),
                "chosen": "w1 " + words(reply_len),
                "rejected": "w2 " + words(reply_len),
            }
            out.write(json.dumps(row) + "\n")
    return path


SPEC = """version: 1
name: {name}
model:
  name_or_path: {model}
{lora}data:
  source: {{kind: files, paths: [{data}]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: 0.1, seed: 0}}
approach: {{kind: bradley_terry}}
training:
  global_batch_size: {batch}
  max_length: {max_length}
  max_steps: {steps}
  save_steps: {save_steps}
  logging_steps: 1
  packing: {packing}
  gradient_checkpointing: {checkpointing}
  seed: 7
hardware: {hardware}
eval: {{validation: false, benchmarks: []}}
output: {{dir: {out}}}
"""


def write_spec(folder: Path, name: str, model: Path, data: Path, *, cuda: bool, **case) -> Path:
    hardware = "{device: auto, gpus_per_node: 1}" if cuda else "{device: cpu, gpus_per_node: 1}"
    if case.get("strategy"):
        hardware = hardware[:-1] + f", strategy: {case['strategy']}}}"
    spec = folder / f"{name}.yaml"
    spec.write_text(
        SPEC.format(
            name=name,
            model=model,
            lora="  lora: {r: 16, alpha: 32, target_modules: all-linear}\n" if case.get("lora") else "",
            data=data,
            batch=case.get("batch", 8),
            max_length=case["max_length"],
            steps=case.get("steps", 3),
            save_steps=case.get("save_steps", 1000),
            packing=case.get("packing", "off"),
            checkpointing=case.get("checkpointing", "off"),
            hardware=hardware,
            out=folder / "runs" / name,
        )
    )
    return spec
