"""Prompt-once scoring of pairs and best-of-N equals scoring every sequence alone (within 1e-5)."""

from __future__ import annotations

import random

import pytest
import torch

import helpers.models
from helpers.models import bt_approach
from rmspec.evaluate.kinds.base import example_scores
from rmspec.inference.engine import RewardEngine
from rmspec.inference.scoring import head_outputs
from rmspec.inference.shared_prefix import grouped_head_outputs
from rmspec.train.modeling import load_model

tiny_models = helpers.models.tiny_models  # the shared fixture


def _engine(tiny_models, kind, max_length=48):
    loaded = load_model(str(tiny_models[kind]), bt_approach(), seed=0)
    engine = RewardEngine.from_parts(loaded.model.eval(), loaded.tokenizer)
    engine.max_length = max_length
    return engine


def _text(rng, n):
    return " ".join(f"w{rng.randint(3, 70)}" for _ in range(n))


class Example:
    def __init__(self, prompt, responses):
        self.prompt, self.responses = prompt, responses


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_pairs_and_best_of_n_score_as_each_sequence_alone(tiny_models, kind):
    engine = _engine(tiny_models, kind)
    assert engine.prompt_once
    rng = random.Random(1)
    # Some prompts long enough that max_length cuts them (each sequence cut as it is alone).
    examples = [
        Example(_text(rng, rng.choice([3, 12, 40])), [_text(rng, rng.randint(1, 8)) for _ in range(n)])
        for n in (2, 4, 4, 5, 1, 3)
    ]
    got = example_scores(engine, examples)
    items = [(ex.prompt, r) for ex in examples for r in ex.responses]
    alone = [head_outputs(engine.model, [e.ids], engine.tokenizer.pad_token_id)[0][0] for e in engine.encode(items)]
    flat = [v for scores in got for v in scores]
    assert [len(s) for s in got] == [len(ex.responses) for ex in examples]
    torch.testing.assert_close(torch.tensor(flat), torch.tensor(alone), atol=1e-5, rtol=0)
    chosen, rejected = engine.score_pairs(
        [ex.prompt for ex in examples], [ex.responses[0] for ex in examples], [ex.responses[-1] for ex in examples]
    )
    firsts = [scores[0] for scores in got]
    torch.testing.assert_close(torch.tensor(chosen), torch.tensor(firsts), atol=1e-5, rtol=0)


def test_groups_batch_by_sequences_and_keep_order(tiny_models):
    engine = _engine(tiny_models, "llama")
    groups = [[[5, 6, 7, 8], [5, 6, 9]], [], [[10, 11], [10, 12], [10, 13, 14]], [[15]]]
    one = grouped_head_outputs(engine.model, groups, engine.tokenizer.pad_token_id, batch_size=1)
    many = grouped_head_outputs(engine.model, groups, engine.tokenizer.pad_token_id, batch_size=32)
    assert [len(g) for g in one] == [2, 0, 3, 1]
    for a, b in zip(one, many):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=0) if a else None


def test_encoders_keep_one_sequence_at_a_time(tiny_models):
    engine = _engine(tiny_models, "bert")
    assert not engine.prompt_once
    chosen, rejected = engine.score_pairs(["w3 w4"], ["w5"], ["w6 w7"])
    alone = engine.rewards([("w3 w4", "w5"), ("w3 w4", "w6 w7")])
    assert [chosen[0], rejected[0]] == alone


def test_rmspec_score_computes_each_prompt_once_with_the_same_scores(tiny_models, cli, tmp_path, monkeypatch):
    """`rmspec score` on pairs goes through the prompt-once rows on a decoder; scores equal each
    sequence scored alone."""
    import json

    loaded = load_model(str(tiny_models["llama"]), bt_approach(), seed=0)
    model_dir = tmp_path / "model"
    loaded.model.save_pretrained(model_dir)
    loaded.tokenizer.save_pretrained(model_dir)
    rng = random.Random(3)
    rows = [
        {"prompt": _text(rng, rng.choice([3, 12, 30])), "chosen": _text(rng, 4), "rejected": _text(rng, 6)}
        for _ in range(7)
    ]
    src = tmp_path / "pairs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))

    calls = []
    real = RewardEngine.grouped_outputs
    monkeypatch.setattr(
        RewardEngine, "grouped_outputs", lambda self, *a, **k: calls.append(self.prompt_once) or real(self, *a, **k)
    )
    result = cli("score", model_dir, src, "--out", tmp_path / "out.jsonl", "--json")
    assert result.code == 0, result.err
    assert calls and all(calls)  # the decoder took the prompt-once path

    engine = RewardEngine.load(model_dir)
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    encoded = engine.encode([(r["prompt"], r[side]) for r in rows for side in ("chosen", "rejected")])
    alone = [head_outputs(engine.model, [e.ids], engine.tokenizer.pad_token_id)[0][0] for e in encoded]
    got = [v for r in out for v in (r["reward_chosen"], r["reward_rejected"])]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(alone), atol=1e-5, rtol=0)
