"""The plan's per-token activations and a context-parallel rank's keys and values, restated tensor by tensor.

What a Llama block keeps for backward was read off autograd's saved tensors
(bench/context_parallel_acceptance.py plan --tensors --census, bench/results/context_parallel_acceptance.md
section 1): each RMSNorm keeps its input, the normalised value before the weight and the weighted output;
RoPE keeps only cos and sin; SDPA keeps the rotated q, k, v, its output and log-sum-exp, with the keys and
values repeated to every query head whenever a mask is passed (prompt-once rows always pass one), and the
rank of a context-parallel group keeps the gathered keys and values of the whole row, repeated likewise.
Light side: no torch.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rmspec.plan.context_parallel import per_rank_memory, split_tokens
from rmspec.plan.memory import (
    MemoryEstimate,
    TrainingShape,
    activation_bytes,
    layer_activation_bytes_per_token,
    packed_mask_bytes,
)
from rmspec.plan.model_shape import shape_from_config

# bench/context_parallel.py's model: GQA 8 query heads over 4 key/value heads
SHAPE = shape_from_config(
    {
        "model_type": "llama",
        "architectures": ["LlamaForSequenceClassification"],
        "vocab_size": 1000,
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
    },
    "test",
)
ROW = TrainingShape(
    micro_batch=1,
    seqs_per_example=1,
    seq_len=4096,
    head="score",
    precision="fp32",
    master_fp32=False,
    checkpointing=False,
    attn="sdpa",
    packed=True,
)


def _block(kv_width: int, e: int = 4) -> int:
    h, i, q = SHAPE.hidden_size, SHAPE.intermediate_size, SHAPE.q_dim
    norms = 2 * (4 * h + e * h + e * h)  # fp32 input, normalised value, weighted output
    attention = e * (q + kv_width + kv_width + q) + 4 * SHAPE.num_attention_heads  # rotated q, k, v, output, lse
    return norms + attention + e * 4 * i  # gate, activation, up, product


def test_a_packed_row_keeps_keys_and_values_repeated_to_every_query_head():
    assert SHAPE.q_dim == 2 * SHAPE.kv_dim
    assert layer_activation_bytes_per_token(SHAPE, ROW) == _block(SHAPE.q_dim)


def test_without_a_mask_sdpa_keeps_the_key_value_heads_only():
    unpacked = replace(ROW, packed=False, seqs_per_example=2)
    assert layer_activation_bytes_per_token(SHAPE, unpacked) == _block(SHAPE.kv_dim)
    assert layer_activation_bytes_per_token(SHAPE, replace(unpacked, precision="bf16")) == _block(SHAPE.kv_dim, e=2)


@pytest.mark.parametrize(
    ("precision", "fp32_stream", "packed", "measured"),
    [
        ("fp32", False, False, 21_103.5),
        ("bf16", False, False, 11_725.3),
        ("bf16", True, False, 14_447.5),  # autocast over fp32 weights: each linear's own bf16 copy of its input
        ("bf16", True, True, 14_959.5),
    ],
)
def test_saved_bytes_per_token_and_layer_as_autograd_keeps_them(precision, fp32_stream, packed, measured):
    # autograd's saved tensors (each storage once, weights and the mask left out) over 512 tokens and 4 layers,
    # read with bench/context_parallel_acceptance.py's saved_census on this model (torch 2.13, CPU)
    t = replace(ROW, seq_len=512, precision=precision, fp32_stream=fp32_stream, packed=packed)
    assert activation_bytes(SHAPE, t) / (512 * SHAPE.num_layers) == pytest.approx(measured, rel=0.02)


def test_the_measured_saved_bytes_of_the_bench_row():
    # autograd's saved tensors of the 4,096-token row, fp32, without the mask and the weights: 362,439,680 bytes
    # (bench/results/context_parallel_acceptance.jsonl, census at 4,096, N = 1)
    assert activation_bytes(SHAPE, ROW) == pytest.approx(362_439_680, rel=0.02)


def test_a_rank_keeps_the_gathered_keys_and_values_repeated_not_its_own():
    width, local = split_tokens(4096, 2)
    t = replace(ROW, seq_len=local)
    fitted = MemoryEstimate(0, 0, 0, 0, packed_mask_bytes(t), 0, 0, 0, grads_held=False)  # the share's square mask
    adjusted, extra = per_rank_memory(SHAPE, t, fitted, degree=2, row_tokens=4096)
    repeated = 2 * SHAPE.q_dim * 4  # rotated keys and values, fp32, every query head
    assert extra["gathered"] == SHAPE.num_layers * width * repeated
    assert extra["own_kv"] == SHAPE.num_layers * local * repeated
    assert adjusted.temporary == extra["mask"] + extra["gathered"] - extra["own_kv"]
    # measured: SDPA's saved key and value on each rank, 16,777,216 bytes each (4 layers x 4,096 x 256 x 4)
    assert extra["gathered"] == 2 * 16_777_216
