"""Shared-prefix rows give the rewards of the ordinary two-sequence forward (fp32, within 1e-5).

Reference: plain transformers, each pair as two sequences in a padded batch (left or right
padding, 2D mask), the model's own pooling. Checked for tiny Llama, Qwen2 (with sliding-window
layers) and Mistral (sliding window shorter than the sequences), SDPA and eager, one pair per
row and several, rows padded left and right.
"""

from __future__ import annotations

import pytest
import torch

from rmspec.inference.packed_forward import packed_head_outputs
from rmspec.inference.prefix_mask import (
    Group,
    NotPackable,
    allowed,
    check_packable,
    pack_groups,
    split_shared_prefix,
)
from rmspec.train.packing import PackedPairCollator, packed_pair_rewards

VOCAB, PAD = 97, 0


def tiny(kind: str, attn: str):
    from transformers import AutoModelForSequenceClassification, LlamaConfig, MistralConfig, Qwen2Config

    from helpers.models import TINY_DECODER

    common = dict(TINY_DECODER, vocab_size=VOCAB, max_position_embeddings=256, pad_token_id=PAD, num_labels=1)
    if kind == "llama":
        config = LlamaConfig(**common)
    elif kind == "qwen2":  # layer 0 full, layer 1 sliding window 6: the per-layer-type mask dict
        config = Qwen2Config(use_sliding_window=True, sliding_window=6, max_window_layers=1, **common)
    else:  # every layer windowed, window shorter than most sequences here
        config = MistralConfig(sliding_window=7, **common)
    config._attn_implementation = attn
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation=attn).eval()
    return model


def random_pairs(n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        p = int(torch.randint(0, 14, (1,), generator=g))
        prompt = torch.randint(1, VOCAB, (p,), generator=g).tolist()
        c = torch.randint(1, VOCAB, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).tolist()
        r = torch.randint(1, VOCAB, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).tolist()
        pairs.append((prompt + c, prompt + r))
    # edge cases: rejected a prefix of chosen, responses sharing leading tokens, no prompt
    pairs.append(([5, 6, 7, 8, 9], [5, 6, 7]))
    pairs.append(([3, 4, 10, 11, 12], [3, 4, 10, 11, 13, 14]))
    pairs.append(([20], [21, 22]))
    return pairs


def reference(model, sequences: list[list[int]], side: str) -> torch.Tensor:
    """Plain transformers: one padded batch, 2D mask, the model's own last-non-pad pooling."""
    width = max(len(s) for s in sequences)
    ids, mask = [], []
    for s in sequences:
        pad = [PAD] * (width - len(s))
        ids.append(pad + s if side == "left" else s + pad)
        mask.append([0] * len(pad) + [1] * len(s) if side == "left" else [1] * len(s) + [0] * len(pad))
    ids, mask = torch.tensor(ids), torch.tensor(mask)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, 0]


@pytest.mark.parametrize("kind", ["llama", "qwen2", "mistral"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("several", [False, True])
def test_packed_rewards_equal_the_two_sequence_forward(kind, attn, side, several):
    model = tiny(kind, attn)
    pairs = random_pairs(9, seed=len(kind) * 7 + len(attn) + len(side))
    groups = [split_shared_prefix([c, r]) for c, r in pairs]
    rows = pack_groups(groups, PAD, pad_side=side, several_per_row=several)
    if several:
        assert rows.input_ids.shape[0] < len(pairs)  # several pairs did share rows
    with torch.no_grad():
        got = packed_head_outputs(model, rows)[:, 0]
    expected = reference(model, [s for pair in pairs for s in pair], side)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_rows_compute_each_prompt_once():
    pairs = [([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 7]), ([8, 9], [8, 10, 11])]
    rows = pack_groups([split_shared_prefix(list(p)) for p in pairs], PAD, several_per_row=False)
    assert rows.input_ids.tolist() == [[1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 0, 0, 0]]
    assert rows.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 4], [0, 1, 1, 2, 0, 0, 0]]
    assert rows.ends.tolist() == [5, 6, 8, 10]
    ok = allowed(rows)[0, 0].int().tolist()
    # the rejected response (index 6) sees the prompt 0..3 and itself, not the chosen 4..5
    assert ok[6] == [1, 1, 1, 1, 0, 0, 1]
    assert ok[5] == [1, 1, 1, 1, 1, 1, 0]


def test_first_fit_packs_short_pairs_together_never_past_the_longest():
    groups = [Group([1] * 10, [[2] * 5, [3] * 5]), Group([4], [[5], [6]]), Group([7] * 3, [[8], [9] * 2])]
    rows = pack_groups(groups, PAD)
    assert rows.input_ids.shape == (1, 20) or rows.input_ids.shape[1] == 20
    assert rows.input_ids.shape[0] == 2  # 20 | 3 + 6 in one row
    assert rows.real_tokens == 20 + 3 + 6


def test_collator_and_rewards_keep_pair_order():
    model = tiny("llama", "sdpa")
    pairs = random_pairs(5, seed=3)
    batch = PackedPairCollator(PAD)(
        [{"chosen_input_ids": c, "rejected_input_ids": r, "margin": None} for c, r in pairs]
    )
    with torch.no_grad():
        chosen, rejected = packed_pair_rewards(model, batch)
    expected = reference(model, [c for c, _ in pairs] + [r for _, r in pairs], "right")
    torch.testing.assert_close(chosen, expected[: len(pairs)], atol=1e-5, rtol=0)
    torch.testing.assert_close(rejected, expected[len(pairs) :], atol=1e-5, rtol=0)


def test_encoders_and_maskless_attention_are_refused_with_the_reason():
    from transformers import BertConfig, LlamaConfig

    with pytest.raises(NotPackable, match="both directions"):
        check_packable(BertConfig())
    config = LlamaConfig()
    config._attn_implementation = "flash_attention_2"
    with pytest.raises(NotPackable, match="no custom 4D mask"):
        check_packable(config)
