"""Listwise rows packed as [prompt | r_1 | ... | r_N] give each [prompt | r_i] sequence's reward alone
(fp32, within 1e-5), and the Plackett-Luce loss of the packed batch equals the unpacked one's.

Reference: plain transformers, each sequence alone (batch of one, no padding), the model's own
pooling. Tiny Llama and Qwen2 (one full and one sliding-window layer), SDPA and eager; prompts
with 2 to 5 responses, responses sharing leading tokens, no prompt at all, several prompts per row.
"""

from __future__ import annotations

import pytest
import torch

from rmspec.train.listwise import ListCollator, PackedListCollator, list_rewards
from rmspec.train.objectives.listwise import plackett_luce_loss

VOCAB, PAD = 97, 0


def tiny(kind: str, attn: str):
    from transformers import AutoModelForSequenceClassification, LlamaConfig, Qwen2Config

    from helpers.models import TINY_DECODER

    common = dict(TINY_DECODER, vocab_size=VOCAB, max_position_embeddings=256, pad_token_id=PAD, num_labels=1)
    if kind == "llama":
        config = LlamaConfig(**common)
    else:
        config = Qwen2Config(use_sliding_window=True, sliding_window=6, max_window_layers=1, **common)
    config._attn_implementation = attn
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config, attn_implementation=attn).eval()


def ranked_rows(n: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)

    def draw(lo, hi):
        return torch.randint(1, VOCAB, (int(torch.randint(lo, hi, (1,), generator=g)),), generator=g).tolist()

    rows = []
    for _ in range(n):
        prompt = draw(0, 14)
        k = int(torch.randint(2, 6, (1,), generator=g))
        responses = [prompt + draw(1, 9) for _ in range(k)]
        rows.append({"responses_input_ids": responses, "scores": torch.rand(k, generator=g).tolist()})
    rows.append({"responses_input_ids": [[5, 6, 7, 8, 9], [5, 6, 7], [5, 6, 7, 8, 1]], "scores": [3.0, 1.0, 2.0]})
    rows.append({"responses_input_ids": [[20], [21, 22], [23, 24, 25]], "scores": [1.0, 1.0, 0.0]})  # no prompt
    return rows


def alone(model, ids: list[int]) -> float:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0, 0].item()


@pytest.mark.parametrize("several_per_row", [True, False])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_packed_list_rewards_equal_each_sequence_alone(kind, attn, several_per_row):
    model = tiny(kind, attn)
    rows = ranked_rows(6, seed=1)
    batch = PackedListCollator(PAD, several_per_row=several_per_row)(rows)
    if several_per_row:
        assert batch["input_ids"].shape[0] < len(rows)  # some prompts did share a row
    with torch.no_grad():
        rewards, mask = list_rewards(model, batch)
    for b, row in enumerate(rows):
        n = len(row["responses_input_ids"])
        assert mask[b].tolist() == [True] * n + [False] * (mask.shape[1] - n)
        expected = torch.tensor([alone(model, ids) for ids in row["responses_input_ids"]])
        torch.testing.assert_close(rewards[b, :n], expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_packed_listwise_loss_and_gradients_equal_unpacked(kind):
    model = tiny(kind, "sdpa").train()  # dropout is 0 in these configs
    rows = ranked_rows(5, seed=2)
    losses, grads = [], []
    for collator in (ListCollator(PAD), PackedListCollator(PAD)):
        batch = collator(rows)
        model.zero_grad()
        rewards, mask = list_rewards(model, batch)
        loss = plackett_luce_loss(rewards, batch["list_scores"], mask, None)
        loss.backward()
        losses.append(loss.item())
        grads.append(model.score.weight.grad.clone())
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


def test_packed_row_holds_each_prompt_once():
    rows = ranked_rows(4, seed=3)
    batch = PackedListCollator(PAD, several_per_row=False)(rows)
    for b, row in enumerate(rows):
        seqs = row["responses_input_ids"]
        unpacked = sum(len(s) for s in seqs)
        packed = int((batch["packed_group"][b] >= 0).sum())
        shared = min(len(s) for s in seqs) - 1
        common = next((i for i in range(shared) if any(s[i] != seqs[0][i] for s in seqs)), shared)
        assert packed == unpacked - (len(seqs) - 1) * common


def test_listwise_packs_on_decoders_only():
    from rmspec.errors import PlanError
    from rmspec.plan.packing import OFF, SHARED_PREFIX, plan_packing

    assert plan_packing("auto", "listwise", "decoder", "sdpa")[0] == SHARED_PREFIX
    assert plan_packing("off", "listwise", "decoder", "sdpa")[0] == OFF
    path, why = plan_packing("auto", "listwise", "encoder", "sdpa")
    assert path == OFF and "both directions" in why
    assert plan_packing("auto", "listwise", "decoder", "flash_attention_2")[0] == OFF
    with pytest.raises(PlanError):
        plan_packing("shared_prefix", "listwise", "encoder", "sdpa")


def test_the_run_time_path_of_a_tiny_decoder_is_packed():
    from rmspec.train.packing import packing_path

    config = tiny("llama", "sdpa").config
    assert packing_path("auto", "listwise", config)[0] == "shared_prefix"
