"""Pointwise: regression over attributes and ordinal classification; metrics checked by hand."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import helpers.models
from helpers.trainer import as_dataset, write_spec
from rmspec.train.arguments import build_training_arguments
from rmspec.train.factory import build_trainer
from rmspec.train.losses import masked_mse, ordinal_expectation, ordinal_loss
from rmspec.train.modeling import load_model, num_outputs
from rmspec.train.pointwise import grouped_pair_accuracy, pointwise_metrics

tiny_models = helpers.models.tiny_models  # the shared fixture


def test_masked_mse_skips_unscored_attributes():
    pred = torch.tensor([[1.0, 2.0], [0.0, 4.0]])
    gold = torch.tensor([[2.0, float("nan")], [0.0, 1.0]])
    assert masked_mse(pred, gold).item() == pytest.approx((1 + 0 + 9) / 3)


def test_ordinal_loss_and_expectation_by_hand():
    logits = torch.tensor([[0.0, 1.0, 2.0]])  # one attribute, scale 0..2
    probs = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    assert ordinal_loss(logits, torch.tensor([[1.0]]), bins=3, low=0.0).item() == pytest.approx(
        -np.log(probs[1]), rel=1e-5
    )
    assert ordinal_expectation(logits, 3, 0.0).item() == pytest.approx(float(probs @ [0, 1, 2]), rel=1e-5)
    assert (
        num_outputs(
            SimpleNamespace(
                kind="pointwise", objective="ordinal", attributes=["a", "b"], scale=SimpleNamespace(min=0, max=4)
            )
        )
        == 10
    )


def test_metrics_per_attribute_and_grouped_accuracy():
    from scipy.stats import pearsonr, spearmanr

    pred = np.array([[1.0, 0.5], [2.0, 0.1], [3.5, 0.9], [0.2, 0.3]])
    gold = np.array([[1.0, 1.0], [2.5, 0.0], [3.0, 1.0], [0.0, 0.0]])
    out = pointwise_metrics(["help", "safe"], {"help": 1.0, "safe": 0.0}, ["p", "p", "q", "q"])(
        SimpleNamespace(predictions=pred, label_ids=gold)
    )
    assert out["help/mse"] == pytest.approx(np.mean((pred[:, 0] - gold[:, 0]) ** 2))
    assert out["safe/mae"] == pytest.approx(np.mean(np.abs(pred[:, 1] - gold[:, 1])))
    assert out["help/pearson"] == pytest.approx(pearsonr(pred[:, 0], gold[:, 0])[0])
    assert out["safe/spearman"] == pytest.approx(spearmanr(pred[:, 1], gold[:, 1])[0])
    # prompt p: gold 1.0 < 2.5 and pred 1.0 < 2.0 (right); prompt q: gold 3.0 > 0.0, pred 3.5 > 0.2 (right)
    assert out["accuracy"] == 1.0
    assert grouped_pair_accuracy(
        np.array([1.0, 1.0, 0.0]), np.array([2.0, 1.0, 0.0]), ["a", "a", "a"]
    ) == pytest.approx(2 / 3)


def _rows(tok, n, seed):
    """Score 0-4 per attribute from how many w1 (helpfulness) and w2 (verbosity) words appear."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(0, 4), rng.randint(0, 4)
        words = ["w1"] * a + ["w2"] * b + [f"w{rng.randint(10, 70)}" for _ in range(rng.randint(1, 4))]
        rng.shuffle(words)
        text = " ".join(words)
        rows.append(
            {
                "id": str(i),
                "prompt": f"p{i % 7}",
                "response": text,
                "scores": [float(a), float(b)],
                "input_ids": tok(text)["input_ids"],
            }
        )
    return rows


@pytest.mark.parametrize(
    "kind,objective,lr,steps",
    [
        ("llama", "regression", "1.0e-2", 60),
        ("qwen2", "regression", "1.0e-2", 60),
        ("bert", "regression", "1.0e-2", 60),
        ("gpt2", "ordinal", "1.0e-2", 60),
        ("bert", "ordinal", "2.0e-3", 160),  # 1e-2 stalls BERT's tanh pooler under a 10-way softmax
    ],
)
def test_pointwise_learns_the_scores(tmp_path, tiny_models, kind, objective, lr, steps):
    loaded_spec = write_spec(
        tmp_path,
        tiny_models[kind],
        approach=f"{{kind: pointwise, attributes: [helpfulness, verbosity], objective: {objective}}}",
        mapping="{columns: {response: text, scores: {helpfulness: h, verbosity: v}}}",
        training=f"{{max_steps: {steps}, learning_rate: {lr}, global_batch_size: 16, logging_steps: 20, seed: 0}}",
    )
    spec = loaded_spec.spec
    loaded = load_model(str(tiny_models[kind]), spec.approach, seed=0)
    tok = loaded.tokenizer
    train, val = as_dataset(_rows(tok, 320, 0)), as_dataset(_rows(tok, 64, 1))
    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=True, use_cpu=True)
    trainer = build_trainer(spec, loaded.model, tok, args, train, val)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after["eval_mse"] < 0.5 * before["eval_mse"]
    assert after["eval_helpfulness/pearson"] > 0.7
    assert {"eval_verbosity/mae", "eval_verbosity/spearman"} <= set(after)
