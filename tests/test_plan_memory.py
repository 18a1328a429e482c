"""The memory model against formulas worked by hand (ZeRO paper, DeepSpeed's estimators, REFERENCE section 2)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rmspec.plan.catalog import catalog_config
from rmspec.plan.memory import TrainingShape, activation_bytes, estimate, lora_parameters

KEY, CONFIG = catalog_config("meta-llama/Llama-3.1-8B")


def llama8b():
    from rmspec.plan.model_shape import shape_from_config

    return shape_from_config(CONFIG, KEY)


SHAPE = llama8b()
P = SHAPE.trained_parameters("score")
BASE = TrainingShape(
    micro_batch=1,
    seqs_per_example=2,
    seq_len=1024,
    head="score",
    precision="bf16",
    master_fp32=True,
    checkpointing=False,
)


def _est(strategy, t=BASE, n=8, gpn=8, nodes=1):
    return estimate(SHAPE, t, strategy, num_processes=n, gpus_per_node=gpn, nodes=nodes)


def _states(m):
    return m.weights + m.gradients + m.optimizer


def test_single_device_mixed_precision_is_16_bytes_per_parameter():
    m = _est("single", n=1, gpn=1)
    assert _states(m) == 16 * P
    # fp32 master weights, fp32 gradients, two fp32 Adam moments
    assert (m.weights, m.gradients, m.optimizer) == (4 * P, 4 * P, 8 * P)


def test_pure_bf16_is_8_bytes_per_parameter():
    m = _est("single", replace(BASE, master_fp32=False), n=1, gpn=1)
    assert _states(m) == 8 * P


def test_fsdp_full_shard_divides_states_by_processes():
    assert _states(_est("fsdp_full_shard", n=8)) == pytest.approx(16 * P / 8)
    assert _states(_est("fsdp_full_shard", n=64, gpn=8, nodes=8)) == pytest.approx(16 * P / 64)


def test_ddp_keeps_everything_and_adds_gradient_buckets():
    m = _est("ddp")
    assert _states(m) == 16 * P and m.buffers == 4 * P


def test_deepspeed_zero2_matches_its_estimator():
    n = 8
    m = _est("deepspeed_zero2", n=n)
    assert _states(m) == pytest.approx(2 * P + 18 * P / n)


def test_deepspeed_zero3_matches_its_estimator():
    n = 8
    m = _est("deepspeed_zero3", n=n)
    largest = max(SHAPE.layer_parameters(), SHAPE.vocab_size * SHAPE.hidden_size)
    assert _states(m) + m.temporary == pytest.approx(4 * largest + 18 * P / n)


def test_offload_moves_states_to_host():
    fs = _est("fsdp_full_shard")
    off = _est("fsdp_full_shard_offload")
    assert off.weights == off.gradients == off.optimizer == 0
    assert off.cpu_per_node == pytest.approx(_states(fs) * 8)  # every process of the node
    assert off.total < fs.total


def test_pairs_double_the_sequences():
    pairs = activation_bytes(SHAPE, replace(BASE, micro_batch=2, seqs_per_example=2))
    rows = activation_bytes(SHAPE, replace(BASE, micro_batch=4, seqs_per_example=1))
    assert pairs == rows == 2 * activation_bytes(SHAPE, replace(BASE, micro_batch=1))


def test_checkpointing_keeps_one_input_per_block_plus_one_block():
    t = replace(BASE, checkpointing=True)
    off = activation_bytes(SHAPE, BASE)
    on = activation_bytes(SHAPE, t)
    tokens, h, layers = 2 * 1024, SHAPE.hidden_size, SHAPE.num_layers
    per_layer_full = (off / tokens - 8 * h) / layers  # minus what sits outside the blocks
    assert on == pytest.approx(tokens * (layers * 2 * h + per_layer_full + 8 * h))
    assert on < off / 10


def test_eager_attention_adds_the_score_matrices():
    eager = activation_bytes(SHAPE, replace(BASE, attn="eager"))
    sdpa = activation_bytes(SHAPE, BASE)
    tokens = 2 * 1024
    scores = 2 * 2 * SHAPE.num_attention_heads * 1024
    repeated = 2 * 2 * (SHAPE.q_dim - SHAPE.kv_dim)  # eager keeps keys and values repeated to every query head
    assert eager - sdpa == pytest.approx(tokens * SHAPE.num_layers * (scores + repeated))


def test_generative_head_adds_fp32_logits():
    lm = replace(BASE, head="lm", seqs_per_example=1)
    score = replace(BASE, head="score", seqs_per_example=1)
    m_lm, m_score = _est("single", lm, n=1, gpn=1), _est("single", score, n=1, gpn=1)
    tokens = 1024
    autocast_extra = (SHAPE.trained_parameters("lm") - SHAPE.trained_parameters("score")) * 2
    assert m_lm.temporary - m_score.temporary == pytest.approx(tokens * SHAPE.vocab_size * (2 + 4) + autocast_extra)


def test_lora_counts_rank_times_in_plus_out():
    h, i, kv = 4096, 14336, 1024
    per_layer = 16 * ((h + h) + (h + kv) + (h + kv) + (h + h) + 3 * (h + i))
    assert lora_parameters(SHAPE, 16, None) == 32 * per_layer
    assert lora_parameters(SHAPE, 8, ("q", "v")) == 32 * 8 * ((h + h) + (h + kv))
    m = _est("single", replace(BASE, lora_rank=16), n=1, gpn=1)
    trainable = 32 * per_layer + h
    assert m.weights == pytest.approx(P * 2 + trainable * 4)  # frozen bf16 base + fp32 adapters
    assert m.optimizer == trainable * 8


def test_gradient_accumulation_keeps_gradients_alive():
    once = _est("ddp", replace(BASE, grad_accum=1))
    accum = _est("ddp", replace(BASE, grad_accum=4))
    assert accum.total - once.total == pytest.approx(
        max(
            0,
            accum.activations
            + accum.temporary
            + accum.gradients
            - max(once.activations + once.temporary, once.gradients + once.step_temporary),
        )
    )
