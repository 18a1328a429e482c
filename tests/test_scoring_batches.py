"""Scoring batches (rmspec.inference.batches): length-sorted, at most batch_size rows, and a padded batch cut where
its attention mask (rows x width x width) would pass the budget, so long rows are scored alone; the scores are the
ones each row gets alone."""

from __future__ import annotations

import random

import pytest

from helpers.ci import need
from rmspec.inference import batches
from rmspec.inference.batches import MASK_ELEMENTS, length_batches


def _old_batches(lengths, batch_size):
    """What scoring did before the mask bound: the length-sorted order cut every batch_size rows."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[s : s + batch_size] for s in range(0, len(order), batch_size)]


def test_every_row_once_in_length_order_within_both_bounds():
    rng = random.Random(0)
    lengths = [rng.choice([rng.randint(5, 600), rng.randint(600, 20_000)]) for _ in range(300)] + [30_000] * 9
    cut = length_batches(lengths, 32)
    flat = [i for batch in cut for i in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    for batch in cut:
        widths = [lengths[i] for i in batch]
        assert len(batch) <= 32
        if len(set(widths)) > 1:  # padded: its mask holds rows x width x width
            assert len(batch) * max(widths) ** 2 <= MASK_ELEMENTS
    # nine rows of one length need no mask: they batch together however long they are
    assert any(len(b) == 9 and {lengths[i] for i in b} == {30_000} for b in cut)
    # a row of over 8,192 tokens (2 x 8,192^2 is the budget) is alone unless its batch is of one length
    assert all(len(b) == 1 or len({lengths[i] for i in b}) == 1 for b in cut if max(lengths[i] for i in b) > 8192)
    assert sum(len(b) == 1 for b in cut) > 20


def test_short_rows_batch_as_before():
    rng = random.Random(1)
    lengths = [rng.randint(1, 1448) for _ in range(500)]  # 32 x 1448^2 is under the budget
    assert length_batches(lengths, 32) == _old_batches(lengths, 32)
    assert length_batches(lengths, 7) == _old_batches(lengths, 7)


def test_an_unbounded_budget_is_the_old_cut_and_a_bad_batch_size_is_refused():
    lengths = [100, 9000, 5000, 12_000, 3]
    assert length_batches(lengths, 2, mask_elements=float("inf")) == _old_batches(lengths, 2)
    with pytest.raises(ValueError, match="at least 1"):
        length_batches(lengths, 0)


def _tiny_llama():
    """A 2-layer Llama reward model with random weights (seeded), pad token 0."""
    torch = need("torch")
    transformers = need("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        num_labels=1,
        pad_token_id=0,
    )
    return transformers.LlamaForSequenceClassification(config).eval()


def test_long_rows_are_scored_alone_with_the_scores_they_get_alone(monkeypatch, tmp_path):
    """A tiny Llama scores rows of 40-200 tokens with the budget at 20,000 mask elements: the model never sees a
    padded batch past it, and every score equals the row scored by itself."""
    from rmspec.inference.scoring import score_token_ids

    model = _tiny_llama()
    seen = []
    model.register_forward_pre_hook(lambda _m, _a, kw: seen.append(kw["attention_mask"].clone()), with_kwargs=True)
    rng = random.Random(2)
    rows = [[rng.randint(1, 99) for _ in range(n)] for n in (40, 200, 41, 45, 199, 120, 60, 200)]
    monkeypatch.setattr(batches, "MASK_ELEMENTS", 20_000)
    scores = score_token_ids(model, rows, 0, batch_size=8)
    for mask in seen:
        padded = not bool(mask.all())
        assert not padded or mask.shape[0] * mask.shape[1] ** 2 <= 20_000
    assert sorted(len(m) for m in seen) == [1, 1, 2, 4]  # [40 41 45 60] [120] [199] [200 200]: no mask for the last
    alone = [score_token_ids(model, [row], 0, batch_size=1)[0] for row in rows]
    assert scores == pytest.approx(alone, abs=1e-5)
    assert len({round(s, 5) for s in alone}) > 4


def test_prompt_once_groups_keep_the_mask_bound_and_a_wide_group_is_scored_alone(monkeypatch):
    """Prompt-once scoring (rmspec.inference.shared_prefix) on rows of 512 columns or fewer attends through the
    packed mask on CPU, as every row does on a GPU: with the budget at 20,000 mask elements, no packed forward
    passes it, the group too wide for it alone is scored one response at a time, and every score equals the
    response scored alone."""
    from rmspec.inference import packed_forward
    from rmspec.inference.scoring import score_token_ids
    from rmspec.inference.shared_prefix import grouped_head_outputs

    model = _tiny_llama()
    rng = random.Random(3)

    def group(prompt: int, *responses: int) -> list[list[int]]:
        shared = [rng.randint(1, 99) for _ in range(prompt)]
        return [shared + [rng.randint(1, 99) for _ in range(n)] for n in responses]

    groups = [group(40, 10, 12), group(50, 8, 9, 11), group(60, 20, 5), group(150, 30, 25)]  # the last: 205 wide
    shapes = []
    real = packed_forward.packed_head_outputs

    def spy(model_, rows):
        shapes.append(tuple(rows.input_ids.shape))
        return real(model_, rows)

    monkeypatch.setattr(packed_forward, "packed_head_outputs", spy)
    monkeypatch.setattr(batches, "MASK_ELEMENTS", 20_000)
    got = grouped_head_outputs(model, groups, 0, batch_size=32)
    assert shapes and all(rows * width * width <= 20_000 for rows, width in shapes)
    assert all(width < 150 for _, width in shapes)  # the 205-wide group never packed: 205^2 > 20,000
    for sequences, outputs in zip(groups, got):
        alone = [score_token_ids(model, [s], 0, batch_size=1)[0] for s in sequences]
        assert [o[0] for o in outputs] == pytest.approx(alone, abs=1e-5)
