"""A tiny judge for GRPO runs: a synthetic preference task the text decides (the correct sum wins)
and a Llama-shaped causal LM (~1M parameters, built from a config) whose word-level vocabulary
covers the judge prompt and has the verdicts [[A]] and [[B]] as single tokens."""

from __future__ import annotations

import json
import random
from pathlib import Path

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [{data}]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: 0.25, seed: 0}}
approach:
  kind: generative
  method: grpo
  max_new_tokens: 4
  grpo: {{num_generations: 4, max_completion_length: 4, temperature: 1.0{grpo}}}
training:
  learning_rate: {lr}
  lr_scheduler: constant
  max_steps: {steps}
  global_batch_size: 16
  micro_batch_size: 16
  max_length: 256
  logging_steps: 1
  save_steps: {save}
  seed: {seed}
hardware: {{device: cpu}}
eval: {{validation: true, benchmarks: []}}
output: {{dir: {out}}}
"""


CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def arithmetic_pairs(path: Path, n: int, seed: int = 0) -> None:
    """`a + b =`: the chosen response is the sum, the rejected one is off by 1 to 3."""
    rng = random.Random(seed)
    with path.open("w") as handle:
        for i in range(n):
            a, b = rng.randint(0, 9), rng.randint(0, 9)
            wrong = a + b + rng.choice([-3, -2, -1, 1, 2, 3])
            row = {"id": f"p{i}", "prompt": f"{a} + {b} =", "chosen": str(a + b), "rejected": str(abs(wrong))}
            handle.write(json.dumps(row) + "\n")


def build_judge_model(folder: Path, *, hidden: int = 128, layers: int = 4, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from rmspec.inference.judge import JUDGE_INSTRUCTION

    corpus = [JUDGE_INSTRUCTION, "[Prompt] [Response A] [Response B] User : Assistant : + = <user> <assistant>"]
    corpus += [str(k) for k in range(0, 25)]
    words = []
    for text in corpus:
        for word, _ in pre_tokenizers.Whitespace().pre_tokenize_str(text):
            if word not in words:
                words.append(word)
    vocab = {w: i for i, w in enumerate(["<unk>", "<eos>", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A <eos>", special_tokens=[("<eos>", vocab["<eos>"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>")
    fast.add_tokens(["[[A]]", "[[B]]"])
    fast.chat_template = CHAT_TEMPLATE  # rmspec serve's OpenAI route renders chats with it
    fast.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=fast.eos_token_id,
        bos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def write_spec(
    tmp: Path,
    model: Path,
    *,
    name: str = "grpo",
    steps: int = 12,
    lr: float = 3e-3,
    seed: int = 7,
    save: int = 500,
    grpo: str = "",
    rows: int = 64,
) -> Path:
    data = tmp / "sums.jsonl"
    if not data.exists():
        arithmetic_pairs(data, rows)
    spec = tmp / f"{name}.yaml"
    spec.write_text(
        SPEC.format(
            name=name,
            model=model,
            data=data,
            steps=steps,
            lr=lr,
            seed=seed,
            save=save,
            grpo=grpo,
            out=tmp / "runs" / name,
        )
    )
    return spec
