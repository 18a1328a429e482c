"""Attention by blocks (rmspec.inference.block_attention) against SDPA with the whole prompt-once mask.

Outputs and the gradients of queries, keys and values within 1e-6 of their largest value in fp32 (grouped-query heads, pairs, lists,
padding, examples with no prompt, a context-parallel rank's queries); bf16 no further from fp32 than SDPA's own
bf16; the plan's calls skip what the mask forbids and hold no more mask than the planner sizes; a tiny decoder's
packed forward and a packed training run equal the masked path and the unpacked run.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

import helpers.models
from helpers.trainer import pair_rows, train_logged
from rmspec.inference import block_attention, packed_forward
from rmspec.inference.block_attention import CAUSAL, FULL, MASKED, attend, block_plan, usable
from rmspec.inference.packed_attention import step
from rmspec.inference.prefix_mask import Group, additive_mask, allowed, pack_groups
from rmspec.plan.blocks import ATTENTION_BLOCK, PARTIAL_BLOCKS, block_mask_bytes
from rmspec.train.context_parallel import pad_columns, shard

tiny_models = helpers.models.tiny_models  # the shared fixture
HEADS, KV_HEADS, DIM = 4, 2, 8


def ids(n: int, seed: int) -> list[int]:
    return torch.randint(5, 90, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def layouts() -> dict[str, object]:
    return {
        "pairs_lists_padding": pack_groups(
            [
                Group(ids(40, 1), [ids(9, 2), ids(13, 3)]),
                Group(ids(5, 4), [ids(3, 5), ids(4, 6), ids(2, 7)]),  # a list of three
                Group(ids(70, 8), [ids(20, 9), ids(1, 10)]),
                Group([], [ids(17, 11)]),  # an example with no prompt (pointwise's rows)
            ],
            0,
            capacity=100,
        ),
        "long_prompt_pair": pack_groups([Group(ids(150, 12), [ids(30, 13), ids(25, 14)])], 0),
    }


def qkv(n: int, width: int, dtype: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    make = lambda heads: torch.randn(n, heads, width, DIM, generator=g).to(dtype).requires_grad_()  # noqa: E731
    return make(HEADS), make(KV_HEADS), make(KV_HEADS)


def by_blocks_and_masked(rows, dtype, queries=None):
    """(outputs, gradients of q, k, v) by blocks and by SDPA with the whole mask, for the same upstream gradient."""
    n, width = rows.group.shape
    q, k, v = qkv(n, width, dtype)
    local = q if queries is None else q[:, :, queries]
    plan = block_plan(rows, queries, dtype)
    got = attend(local, k, v, plan, DIM**-0.5)
    mask = additive_mask(allowed(rows, queries=queries), dtype)
    want = F.scaled_dot_product_attention(local, k, v, attn_mask=mask, enable_gqa=True)
    up = torch.randn(got.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    got_grads = torch.autograd.grad(got, (q, k, v), up, retain_graph=True)
    want_grads = torch.autograd.grad(want, (q, k, v), up)
    return (got, *got_grads), (want, *want_grads), plan


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(block_attention, "BLOCK", 16)  # several blocks in rows of 100-200 columns


@pytest.mark.parametrize("layout", ["pairs_lists_padding", "long_prompt_pair"])
def test_blocks_equal_sdpa_with_the_whole_mask(small_blocks, layout):
    rows = layouts()[layout]
    got, want, plan = by_blocks_and_masked(rows, torch.float32)
    kinds = {c.kind for calls in plan.blocks for c in calls}
    assert kinds == {FULL, CAUSAL, MASKED}, kinds  # every kind of call is exercised
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, want, strict=True):
        assert b.abs().max() > 0.1, name
        torch.testing.assert_close(a, b, atol=1e-6 * float(b.abs().max()), rtol=0, msg=name)


def test_a_context_parallel_ranks_queries_attend_as_in_the_whole_row(small_blocks):
    rows = pad_columns(layouts()["pairs_lists_padding"], 4)
    for rank in (0, 1):
        mine = shard(rows.group.shape[1], 2, rank)
        got, want, _ = by_blocks_and_masked(rows, torch.float32, mine.local)
        for name, a, b in zip(("output", "dq", "dk", "dv"), got, want, strict=True):
            torch.testing.assert_close(a, b, atol=1e-6 * float(b.abs().max()), rtol=0, msg=f"rank {rank}: {name}")


def test_bf16_is_no_further_from_fp32_than_sdpas_own_bf16(small_blocks):
    rows = layouts()["long_prompt_pair"]
    exact, _, _ = by_blocks_and_masked(rows, torch.float32)
    blocks, sdpa, _ = by_blocks_and_masked(rows, torch.bfloat16)
    for name, e, a, b in zip(("output", "dq", "dk", "dv"), exact, blocks, sdpa, strict=True):
        ours, theirs = (a.float() - e).abs().max(), (b.float() - e).abs().max()
        assert ours <= 2 * theirs + 1e-3, f"{name}: {ours} against SDPA's {theirs}"


def test_the_plan_computes_only_what_the_mask_allows(small_blocks):
    """A long prompt's pair: the other response is never computed, the prompt's upper triangle neither."""
    rows = layouts()["long_prompt_pair"]
    width = rows.group.shape[1]
    plan = block_plan(rows)
    work = sum((c.q1 - c.q0) * (c.k1 - c.k0) / (2 if c.kind == CAUSAL else 1) for b in plan.blocks for c in b)
    needed = int(allowed(rows).sum())
    assert needed <= work < needed * 1.15, (work, needed)  # the whole square is width^2: 2.2x this row's needs
    assert work < 0.55 * width * width


def test_partial_masks_stay_within_what_the_plan_sizes():
    """At the real block size: per query block at most PARTIAL_BLOCKS masked calls, and the mask bytes within
    plan.blocks.block_mask_bytes, for a long pair, a list, short examples side by side, and a long group
    followed by others in one row."""
    cases = {
        "pair": pack_groups([Group(ids(2500, 1), [ids(300, 2), ids(700, 3)])], 0),
        "list": pack_groups([Group(ids(900, 4), [ids(37 + 101 * i, 5 + i) for i in range(6)])], 0),
        "short_examples": pack_groups([Group([], [ids(40 + i, i)]) for i in range(60)], 0, capacity=3000),
        "long_then_short": pack_groups(
            [
                Group(ids(1900, 7), [ids(200, 8), ids(150, 9)]),
                *(Group(ids(60, i), [ids(9, i), ids(7, i)]) for i in range(8)),
            ],
            0,
            capacity=3000,
        ),
    }
    for name, rows in cases.items():
        n, width = rows.group.shape
        assert width > ATTENTION_BLOCK, name
        plan = block_plan(rows)
        assert max(sum(c.kind == MASKED for c in b) for b in plan.blocks) <= PARTIAL_BLOCKS, name
        assert 0 < plan.mask_bytes() <= block_mask_bytes(n, width, width, 4), name
        assert plan.mask_bytes() < 0.2 * n * width * width * 4, name  # against the whole row's mask


def test_usable_says_why_a_row_keeps_the_mask():
    cpu = torch.device("cpu")
    assert usable(cpu, ATTENTION_BLOCK + 1, sliding_window=False, dropout=0.0) is None
    assert "one block" in usable(cpu, ATTENTION_BLOCK, sliding_window=False, dropout=0.0)
    assert "cuda" in usable(torch.device("cuda"), 4096, sliding_window=False, dropout=0.0)
    assert "sliding" in usable(cpu, 4096, sliding_window=True, dropout=0.0)
    assert "dropout" in usable(cpu, 4096, sliding_window=False, dropout=0.1)


def spy_plans(monkeypatch) -> list[int]:
    made: list[int] = []
    original = packed_forward.block_plan
    monkeypatch.setattr(packed_forward, "block_plan", lambda *a, **k: made.append(1) or original(*a, **k))
    return made


def test_a_decoders_packed_forward_by_blocks_equals_the_masked_one(small_blocks, monkeypatch):
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    config = LlamaConfig(**{**helpers.models.TINY_DECODER, "vocab_size": 97, "pad_token_id": 0, "num_labels": 1})
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")
    rows = layouts()["pairs_lists_padding"]
    made = spy_plans(monkeypatch)

    def forward_backward(blocks: bool, checkpointing: bool, in_step: bool):
        monkeypatch.setattr(block_attention, "BLOCK", 16 if blocks else 10**9)
        model.zero_grad()
        if checkpointing:
            model.gradient_checkpointing_enable()
        else:
            model.gradient_checkpointing_disable()
        model.train()
        made.clear()
        if in_step:
            with step(model):
                out = packed_forward.packed_head_outputs(model, rows)
                out.square().sum().backward()
        else:
            out = packed_forward.packed_head_outputs(model, rows)
            out.square().sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        return out.detach(), grads, bool(made), model.config._attn_implementation

    ref, ref_grads, used, impl = forward_backward(blocks=False, checkpointing=False, in_step=False)
    assert not used and impl == "sdpa"
    for checkpointing, in_step, expect_blocks in ((False, False, True), (True, True, True), (True, False, False)):
        # with checkpointing outside a training step the recomputation could not attend by blocks: masked
        out, grads, used, impl = forward_backward(True, checkpointing, in_step)
        assert used == expect_blocks, (checkpointing, in_step)
        assert impl == "sdpa"  # back on its own implementation: a saved config.json keeps it
        torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
        for name, g in grads.items():
            torch.testing.assert_close(g, ref_grads[name], atol=1e-6, rtol=0, msg=name)


def test_under_bf16_autocast_blocks_take_autocasts_dtype(monkeypatch):
    """RoPE leaves queries and keys in the fp32 stream and values in bf16; SDPA's autocast casts all three, and
    so does the block attention (a bf16 mask with fp32 queries would be refused by the kernel)."""
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    config = LlamaConfig(**{**helpers.models.TINY_DECODER, "vocab_size": 97, "pad_token_id": 0, "num_labels": 1})
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")
    rows = layouts()["pairs_lists_padding"]
    made = spy_plans(monkeypatch)
    outputs = {}
    for block in (16, 10**9):
        monkeypatch.setattr(block_attention, "BLOCK", block)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            outputs[block] = packed_forward.packed_head_outputs(model, rows)
        outputs[block].float().sum().backward()
    assert made == [1]  # the first by blocks, the second through the mask
    assert outputs[16].dtype == torch.bfloat16
    torch.testing.assert_close(outputs[16].float(), outputs[10**9].float(), atol=2e-2, rtol=0)


def _train(tmp_path, model_dir, packing: str, steps: int = 8):
    """A packed (or unpacked) Bradley-Terry run with gradient checkpointing on; its logged losses."""
    return train_logged(
        tmp_path,
        model_dir,
        approach="{kind: bradley_terry}",
        training=(
            f"{{max_steps: {steps}, learning_rate: 3.0e-3, global_batch_size: 8, logging_steps: 1, seed: 1, "
            f"group_by_length: false, gradient_checkpointing: on, packing: {packing}}}"
        ),
        make_rows=lambda tok: pair_rows(tok, 48, 0),
    )


@pytest.mark.slow
def test_a_packed_run_by_blocks_follows_the_unpacked_run(tmp_path, tiny_models, monkeypatch):
    """Rows of 8 pairs (~100 columns) cut in blocks of 16, gradient checkpointing on: each training step runs
    whole on the packed attention (BaseTrainer.training_step), so the recomputed layers attend by blocks too."""
    made = spy_plans(monkeypatch)
    monkeypatch.setattr(block_attention, "BLOCK", 16)
    packed, packed_losses = _train(tmp_path / "packed", tiny_models["llama"], "auto")
    assert made, "no batch attended by blocks"
    plain, plain_losses = _train(tmp_path / "plain", tiny_models["llama"], "off")
    assert len(packed_losses) == len(plain_losses) == 8
    assert plain_losses[-1] < plain_losses[0]
    for i, (a, b) in enumerate(zip(packed_losses, plain_losses, strict=True), start=1):
        assert a == pytest.approx(b, abs=1e-4), f"step {i}"
    for (name, p), (_, q) in zip(packed.model.named_parameters(), plain.model.named_parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-4, rtol=0, msg=name)
    assert packed.model.config._attn_implementation == "sdpa"


def test_the_plan_says_how_packed_rows_attend_and_sizes_their_masks(tmp_path):
    """A CPU plan of rows over 512 columns attends by blocks (the mask term is the blocks' bound); a GPU plan
    keeps the whole row's mask."""
    import subprocess
    import sys
    from pathlib import Path

    from helpers import REPO

    spec = REPO / "specs" / "quickstart_decoder.yaml"
    exe = str(Path(sys.executable).parent / "rmspec")

    def plan(*sets: str) -> dict:
        argv = [exe, "plan", str(spec), "--json"]
        for s in ("training.max_length=2048", "training.micro_batch_size=1", *sets):
            argv += ["--set", s]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO / "specs", timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    cpu = plan("hardware.device=cpu")
    assert cpu["packing"] == "shared_prefix" and cpu["packed_attention"].startswith("by blocks of 512 columns")
    bound = cpu["packing_tokens"]["row_tokens_bound"]  # the row the plan sizes: over one block
    masks = bound * PARTIAL_BLOCKS * ATTENTION_BLOCK * 4 / 1024**3  # fp32 on this CPU; the whole mask: bound^2 x 4
    assert cpu["memory_per_device_gb"]["temporary"] == pytest.approx(masks, abs=1e-3)
    gpu = plan("hardware.device=a100-80gb")
    assert gpu["packed_attention"].endswith("(on a GPU)")
