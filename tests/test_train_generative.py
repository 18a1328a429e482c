"""Generative judge: the loss counts assistant tokens only; evaluation generates, parses the
verdict with the spec's pattern and reports parse rate and agreement."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from helpers.models import build_model
from helpers.trainer import as_dataset, write_spec
from rmspec.train.arguments import build_training_arguments
from rmspec.train.collators import LMCollator
from rmspec.train.factory import build_trainer
from rmspec.train.generative import judge_metrics, parse_verdict, split_prompt
from rmspec.train.modeling import load_model


def test_split_prompt_takes_the_last_assistant_turn():
    ids = [1, 2, 3, 4, 5, 6, 7, 8]
    labels = [-100, -100, 3, 4, -100, -100, 7, 8]
    assert split_prompt(ids, labels) == ([1, 2, 3, 4, 5, 6], [7, 8])
    assert parse_verdict("so the answer is [[B]].", r"\[\[(A|B)\]\]") == "B"
    assert parse_verdict("no idea", r"\[\[(A|B)\]\]") is None


def _rows(tok, n: int, seed: int):
    """Prompt 'w3 ...' -> reply 'w5 w1'; prompt 'w4 ...' -> reply 'w5 w2' (the verdict is w1 or w2)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        side = rng.random() < 0.5
        prompt = tok(("w3 " if side else "w4 ") + " ".join(f"w{rng.randint(10, 70)}" for _ in range(3)))["input_ids"]
        prompt = [t for t in prompt if t != tok.eos_token_id]
        reply = tok("w5 w1" if side else "w5 w2")["input_ids"]  # ends with eos
        rows.append({"input_ids": prompt + reply, "labels": [-100] * len(prompt) + reply})
    return rows


@pytest.fixture(scope="module")
def causal_llama(tmp_path_factory) -> Path:
    return build_model("llama", tmp_path_factory.mktemp("gen") / "llama", causal=True)


@pytest.fixture(scope="module", params=["llama", "qwen2", "gpt2"])
def causal_model(request, tmp_path_factory) -> Path:
    return build_model(request.param, tmp_path_factory.mktemp("gen") / request.param, causal=True)


def test_loss_is_cross_entropy_over_assistant_tokens_only(tmp_path, causal_llama):
    spec = write_spec(
        tmp_path, causal_llama, approach="{kind: generative}", mapping="{preset: messages}", training="{max_steps: 1}"
    ).spec
    loaded = load_model(str(causal_llama), spec.approach)
    model, tok = loaded.model.eval(), loaded.tokenizer
    rows = _rows(tok, 3, 0)
    batch = LMCollator(tok.pad_token_id)(rows)
    with torch.no_grad():
        loss = model(**batch).loss
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    # By hand: next-token cross-entropy at the positions whose target is an assistant token.
    terms = []
    for i, row in enumerate(rows):
        for t in range(1, len(row["input_ids"])):
            if row["labels"][t] != -100:
                terms.append(F.cross_entropy(logits[i, t - 1][None], torch.tensor([row["labels"][t]])))
    assert loss.item() == pytest.approx(torch.stack(terms).mean().item(), rel=1e-5)


def test_generative_judge_learns_its_verdicts(tmp_path, causal_model):
    spec = write_spec(
        tmp_path,
        causal_model,
        approach="{kind: generative, verdict_pattern: 'w5 (w1|w2)', max_new_tokens: 4}",
        mapping="{preset: messages}",
        training="{max_steps: 60, learning_rate: 1.0e-2, global_batch_size: 16, logging_steps: 20, seed: 0}",
    ).spec
    loaded = load_model(str(causal_model), spec.approach, seed=0)
    tok = loaded.tokenizer
    train, val = as_dataset(_rows(tok, 320, 0)), as_dataset(_rows(tok, 32, 1))
    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=True, use_cpu=True)
    trainer = build_trainer(spec, loaded.model, tok, args, train, val)
    trainer.train()
    rows = [val[i] for i in range(len(val))]
    out = judge_metrics(trainer.model, tok, rows, spec.approach.verdict_pattern, max_new_tokens=4)
    assert out["n"] == 32
    assert out["parse_rate"] >= 0.9
    assert out["agreement"] >= 0.9
    assert trainer.evaluate()["eval_loss"] < 0.2
