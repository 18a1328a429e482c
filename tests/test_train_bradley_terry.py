"""Bradley-Terry: the loss against its formula, rewards at the last real token, batch invariance,
a few training steps and save/reload on tiny Llama-, Qwen2-, GPT-2-shaped models and a BERT."""

from __future__ import annotations

import math

import pytest
import torch

import helpers.models
from helpers.models import ALL, DECODERS, bt_approach
from rmspec.inference.padding import pad_right
from rmspec.train.collators import PairCollator
from rmspec.train.losses import bradley_terry_loss, pair_metrics
from rmspec.train.modeling import load_model, score_head
from rmspec.train.rewards import forward_scores, last_token_index

tiny_models = helpers.models.tiny_models  # the shared fixture


def _logsigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x))


def test_loss_matches_the_formula_by_hand():
    chosen = [1.5, -0.2, 0.3]
    rejected = [0.5, 0.4, 0.3]
    margin = [0.5, 0.0, 1.0]
    c = 0.01
    by_hand = -sum(_logsigmoid(a - b - m) for a, b, m in zip(chosen, rejected, margin)) / 3
    by_hand += c * sum((a + b) ** 2 for a, b in zip(chosen, rejected)) / 3
    got = bradley_terry_loss(torch.tensor(chosen), torch.tensor(rejected), torch.tensor(margin), c)
    assert got.item() == pytest.approx(by_hand, rel=1e-6)
    plain = -sum(_logsigmoid(a - b) for a, b in zip(chosen, rejected)) / 3
    assert bradley_terry_loss(torch.tensor(chosen), torch.tensor(rejected)).item() == pytest.approx(plain, rel=1e-6)


def test_pair_metrics_count_ties_as_wrong():
    m = pair_metrics(torch.tensor([1.0, 0.3, 2.0]), torch.tensor([0.0, 0.3, 3.0]))
    assert m["accuracy"] == pytest.approx(1 / 3)
    assert m["reward_margin"] == pytest.approx((1.0 + 0.0 - 1.0) / 3)


def test_collator_stacks_chosen_then_rejected_with_right_padding():
    batch = PairCollator(pad_token_id=0)(
        [
            {"chosen_input_ids": [5, 6, 7], "rejected_input_ids": [5], "margin": 0.5},
            {"chosen_input_ids": [8], "rejected_input_ids": [9, 9], "margin": None},
        ]
    )
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0], [5, 0, 0], [9, 9, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [1, 0, 0], [1, 1, 0]]
    assert batch["margin"].tolist() == [0.5, 0.0]


def _pad_left(sequences, pad_id):
    width = max(len(s) for s in sequences)
    ids = torch.tensor([[pad_id] * (width - len(s)) + s for s in sequences])
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences])
    return ids, mask


TEXTS = ["w1 w2 w3 w4 w5 w6 w7", "w9 w3", "w4 w4 w8 w10 w11"]


@pytest.mark.parametrize("kind", DECODERS)
def test_decoder_reward_is_the_head_at_the_last_real_token_for_both_padding_sides(tiny_models, kind):
    loaded = load_model(str(tiny_models[kind]), bt_approach(), seed=0)
    model, tok = loaded.model.eval(), loaded.tokenizer
    seqs = [tok(t)["input_ids"] for t in TEXTS]
    head = score_head(model)
    backbone = getattr(model, model.base_model_prefix)
    with torch.no_grad():
        # Independent reading: each text alone, hidden state of its last token through the head.
        expected = torch.stack([head(backbone(torch.tensor([s])).last_hidden_state[0, -1])[0] for s in seqs])
        right = forward_scores(model, *pad_right(seqs, tok.pad_token_id))[:, 0]
        left = forward_scores(model, *_pad_left(seqs, tok.pad_token_id))[:, 0]
    torch.testing.assert_close(right, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(left, expected, atol=1e-5, rtol=1e-4)
    _, mask = _pad_left(seqs, tok.pad_token_id)
    assert last_token_index(mask).tolist() == [mask.shape[1] - 1] * 3


def test_bert_reward_pools_cls_and_ignores_padding(tiny_models):
    loaded = load_model(str(tiny_models["bert"]), bt_approach(), seed=0)
    model, tok = loaded.model.eval(), loaded.tokenizer
    seqs = [tok(t)["input_ids"] for t in TEXTS]
    assert seqs[0][0] == tok.cls_token_id
    with torch.no_grad():
        alone = torch.stack(
            [forward_scores(model, torch.tensor([s]), torch.ones(1, len(s), dtype=torch.long))[0, 0] for s in seqs]
        )
        pooled = model.bert(torch.tensor([seqs[1]])).pooler_output  # [CLS] through the pooler
        by_hand = model.classifier(pooled)[0, 0]
        batch = forward_scores(model, *pad_right(seqs, tok.pad_token_id))[:, 0]
    torch.testing.assert_close(alone[1], by_hand, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(batch, alone, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ALL)
def test_same_score_alone_and_inside_a_padded_batch_of_any_size(tiny_models, kind):
    loaded = load_model(str(tiny_models[kind]), bt_approach(), seed=0)
    model, tok = loaded.model.eval(), loaded.tokenizer
    seqs = [tok(t)["input_ids"] for t in TEXTS] + [tok("w5 " * 30)["input_ids"]]
    with torch.no_grad():
        alone = forward_scores(model, *pad_right(seqs[1:2], tok.pad_token_id))[0, 0]
        for batch in (seqs, seqs[:2], seqs[1:]):
            scores = forward_scores(model, *pad_right(batch, tok.pad_token_id))[:, 0]
            torch.testing.assert_close(scores[batch.index(seqs[1])], alone, atol=1e-5, rtol=1e-4)
