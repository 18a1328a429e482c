"""The loading rules on tiny models built from configs (Llama-, Qwen2-, GPT-2-shaped and a BERT).

The builders and the `tiny_models` fixture live in helpers/models.py.
"""

from __future__ import annotations

import math

import pytest
import torch

import helpers.models
from helpers.models import ALL, bt_approach

tiny_models = helpers.models.tiny_models  # the shared fixture


# ------------------------------------------------------------------ tests of rmspec.train.modeling


@pytest.mark.parametrize("kind", ALL)
def test_pad_token_is_never_eos_and_lands_in_the_config(tiny_models, kind):
    from rmspec.train.modeling import load_model

    loaded = load_model(str(tiny_models[kind]), bt_approach())
    tok, model = loaded.tokenizer, loaded.model
    assert tok.pad_token is not None
    assert tok.pad_token_id != tok.eos_token_id
    assert model.config.pad_token_id == tok.pad_token_id
    assert tok.padding_side == "right"
    if kind == "bert":
        assert tok.pad_token == "[PAD]"
    if kind == "llama":
        assert tok.pad_token == "<unk>"  # an existing non-eos token is preferred to a new one
    if kind in ("qwen2", "gpt2"):  # no pad, no unk: a new token and a resized embedding
        assert model.get_input_embeddings().weight.shape[0] == len(tok)


@pytest.mark.parametrize("kind", ALL)
def test_dropout_is_off_and_head_init_has_the_right_scale(tiny_models, kind):
    from torch import nn

    from rmspec.train.modeling import load_model, score_head

    model = load_model(str(tiny_models[kind]), bt_approach(), seed=3).model
    assert all(m.p == 0.0 for m in model.modules() if isinstance(m, nn.Dropout))
    head = score_head(model)
    assert head is not None and head.weight.shape == (1, 32)
    # 32 draws of normal(0, 1/sqrt(33)): the sample std lies well within a factor 2.
    std = head.weight.std().item()
    assert 0.5 / math.sqrt(33) < std < 2 / math.sqrt(33)
    model.train()
    ids = torch.tensor([[5, 6, 7, 8]])
    a = model(input_ids=ids).logits
    b = model(input_ids=ids).logits
    assert torch.equal(a, b)  # no stochastic layer left in training mode


def test_head_init_is_seeded(tiny_models):
    from rmspec.train.modeling import load_model, score_head

    w1 = score_head(load_model(str(tiny_models["llama"]), bt_approach(), seed=1).model).weight
    w2 = score_head(load_model(str(tiny_models["llama"]), bt_approach(), seed=1).model).weight
    w3 = score_head(load_model(str(tiny_models["llama"]), bt_approach(), seed=2).model).weight
    assert torch.equal(w1, w2) and not torch.equal(w1, w3)
