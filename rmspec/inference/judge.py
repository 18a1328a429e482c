"""Evaluate a generative judge (approach kind: generative) on pair benchmarks.

Each pair is judged twice, as (A, B) and with the responses swapped, the way JudgeBench runs
order-dependent judges; the verdict is the first group of the spec's verdict_pattern in the
generated text. The judge prompt is the one rmspec's judge data uses (rmspec/data/demo/
judge_messages.jsonl, written by scripts/make_demo_data.py), laid out by the data pipeline's
layout (chat template, or "User: ...\\n\\nAssistant:").

torch/transformers are imported inside the functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmspec.approaches.generative import JUDGE_INSTRUCTION, LAYOUT
from rmspec.errors import RmspecError
from rmspec.spec.benchmarks import JUDGE, kinds_scored_by

# The pairwise benchmarks a judge can be scored on, from the benchmark catalogue (alphabetical, as listed in messages).
JUDGE_KINDS = tuple(sorted(kinds_scored_by(JUDGE)))


def judge_prompt_text(prompt: Any) -> str:
    """The prompt as the judge message quotes it: a conversation's one user turn as is, more as plain turns."""
    if isinstance(prompt, str):
        return prompt
    if len(prompt) == 1 and prompt[0]["role"] == "user":
        return str(prompt[0]["content"])
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in prompt)


def judge_message(prompt: Any, response_a: str, response_b: str) -> str:
    prompt = judge_prompt_text(prompt)
    return JUDGE_INSTRUCTION + LAYOUT.format(prompt=prompt, response_a=response_a, response_b=response_b)


def parse_verdict(text: str, pattern: str) -> str | None:
    """The verdict letter, or None when there is none or the text names both (JudgeBench's rule)."""
    found = {m if isinstance(m, str) else next((g for g in m if g), "") for m in re.findall(pattern, text)}
    found.discard("")
    return found.pop() if len(found) == 1 else None


def load_judge(model_dir: str | Path):
    path = Path(model_dir)
    if not (path / "config.json").exists():
        raise RmspecError(
            f"{model_dir}: no config.json, not a model folder",
            "point at the folder with the judge's weights (RUN/model)",
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path)).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return model, tokenizer


def _prompt_ids(layout: Any, tokenizer: Any, messages: Sequence[str]) -> list[list[int]]:
    texts = layout.prompt_texts([[{"role": "user", "content": m}] for m in messages])
    if layout.kind == "template":  # the rendering carries its own special tokens
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [list(layout.single_head) + ids for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def generate(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int, batch_size: int = 8
) -> list[str]:
    """Greedy continuations of token-id prompts, batched by length with left padding."""
    return [
        tokenizer.decode(ids, skip_special_tokens=True)
        for ids in generate_ids(model, tokenizer, prompts, max_new_tokens, batch_size)
    ]


def generate_ids(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int, batch_size: int = 8
) -> list[list[int]]:
    """The generated token ids of each greedy continuation (a finished row is padded after its
    stop token; generated_length finds where it ended)."""
    import torch

    pad = tokenizer.pad_token_id
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[list[int]] = [[] for _ in prompts]
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            width = max(len(prompts[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                seq = prompts[i]
                ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
                mask[row, width - len(seq) :] = 1
            generated = model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad
            )
            for row, i in enumerate(batch):
                out[i] = generated[row, width:].tolist()
    return out


def generated_length(ids: Sequence[int], stops: set[int]) -> tuple[int, bool]:
    """(tokens generated, whether a stop token ended the reply): up to and with the first stop
    token; without one, every token (the reply ran into its budget)."""
    for k, token in enumerate(ids):
        if token in stops:
            return k + 1, True
    return len(ids), False


def judge_rows(
    model: Any, tokenizer: Any, data: Any, *, pattern: str, max_new_tokens: int, layout: Any, batch_size: int = 8
) -> list[dict[str, Any]]:
    """Per-example rows: id, subset, label, the verdicts in both orders and the generated texts."""
    if data.kind not in JUDGE_KINDS:
        raise RmspecError(
            f"a generative judge cannot be scored on {data.kind!r}", f"use one of: {', '.join(JUDGE_KINDS)}"
        )
    firsts, seconds = [], []
    for ex in data.examples:
        a, b = ex.responses[0], ex.responses[1]
        firsts.append(judge_message(ex.prompt, a, b))
        seconds.append(judge_message(ex.prompt, b, a))
    texts = generate(model, tokenizer, _prompt_ids(layout, tokenizer, firsts + seconds), max_new_tokens, batch_size)
    n = len(data.examples)
    rows = []
    for i, ex in enumerate(data.examples):
        # pairs / rewardbench list the chosen response first: the label is A>B.
        label = ex.meta.get("label", "A>B")
        row = {
            "id": ex.id,
            "subset": ex.subset,
            "label": label,
            "verdict": parse_verdict(texts[i], pattern),
            "verdict_swapped": parse_verdict(texts[n + i], pattern),
            "output": texts[i],
            "output_swapped": texts[n + i],
        }
        if "source" in ex.meta:
            row["source"] = ex.meta["source"]
        rows.append(row)
    return rows
