"""The plan says which path Bradley-Terry takes and why, and sizes packed runs by P + C + R."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from helpers.plan import HOST, _spec
from rmspec.errors import PlanError
from rmspec.plan import compile_plan
from rmspec.plan.catalog import catalog_config
from rmspec.plan.memory import TrainingShape, activation_bytes, estimate, packed_mask_bytes
from rmspec.plan.model_shape import shape_from_config
from rmspec.spec import load_spec

QWEN = "Qwen/Qwen2.5-0.5B-Instruct"
SETS = ["hardware.cpu_memory_gb=16", "training.max_length=64", f"model.name_or_path={QWEN}"]


def _pairs(path: Path) -> None:
    # prompt 160 chars (40 tokens at 4 chars/token), chosen 40 (10), rejected 80 (20): sequences of 50 and 60.
    path.write_text(
        "".join(json.dumps({"prompt": "p" * 160, "chosen": "c" * 40, "rejected": "r" * 80}) + "\n" for _ in range(20))
    )


def _plan(tmp_path, *extra):
    _pairs(tmp_path / "pairs.jsonl")
    spec = _spec(tmp_path, "  source:\n    kind: files\n    paths: [pairs.jsonl]\n")
    return compile_plan(load_spec(spec, [*SETS, *extra]), host=HOST).to_json()


def test_decoder_pairs_are_packed_and_sized_by_prompt_once_rows(tmp_path):
    packed = _plan(tmp_path)
    plain = _plan(tmp_path, "training.packing=off")
    assert packed["packing"] == "shared_prefix" and "each prompt computed once" in packed["packing_reason"]
    assert plain["packing"] == "off" and plain["packing_reason"] == "training.packing: off"
    tokens = packed["packing_tokens"]
    # By hand: row 40 + 10 + 20 = 70, unpacked 50 + 60 = 110; +10 % padding, rounded up.
    assert tokens["row_tokens_expected"] == math.ceil(70 * 1.1) == 77
    assert tokens["pair_tokens_unpacked_expected"] == math.ceil(110 * 1.1)
    # Memory bound: max_length + the longest response = 64 + 20.
    assert tokens["row_tokens_bound"] == 84
    assert packed["sequences_per_example"] == 1 and plain["sequences_per_example"] == 2
    assert packed["tokens_per_step"] == 16 * 84 < plain["tokens_per_step"] == 16 * 2 * 64
    assert packed["estimate"]["tokens_per_step"] == 16 * 77
    assert packed["estimate"]["seconds_per_step"] < plain["estimate"]["seconds_per_step"]
    assert packed["memory_per_device_gb"]["activations"] < plain["memory_per_device_gb"]["activations"]


def test_where_packing_does_not_apply_the_plan_says_why(tmp_path):
    encoder = compile_plan(
        load_spec(Path(__file__).resolve().parents[1] / "specs" / "quickstart.yaml", ["hardware.cpu_memory_gb=16"]),
        host=HOST,
    ).to_json()
    assert encoder["packing"] == "off" and "both directions" in encoder["packing_reason"]
    flash = _plan(tmp_path, "model.attn_implementation=flash_attention_2")
    assert flash["packing"] == "off" and "no custom 4D mask" in flash["packing_reason"]
    with pytest.raises(PlanError, match="shared_prefix cannot apply"):
        compile_plan(
            load_spec(
                Path(__file__).resolve().parents[1] / "specs" / "quickstart.yaml",
                ["hardware.cpu_memory_gb=16", "training.packing=shared_prefix"],
            ),
            host=HOST,
        )


def test_memory_of_a_packed_row_is_one_sequence_of_p_plus_c_plus_r_and_its_mask():
    shape = shape_from_config(catalog_config("qwen2.5-0.5b")[1], "qwen2.5-0.5b")
    pairs = TrainingShape(
        micro_batch=4,
        seqs_per_example=2,
        seq_len=1024,
        head="score",
        precision="bf16",
        master_fp32=True,
        checkpointing=False,
    )
    row = replace(pairs, seqs_per_example=1, seq_len=1024 + 256, packed=True)  # P 768, C 256, R 256
    # per token as the two sequences would be under a mask (keys and values repeated to every query head)
    masked = replace(pairs, packed=True)
    assert activation_bytes(shape, row) == pytest.approx(activation_bytes(shape, masked) * 1280 / 2048)
    assert activation_bytes(shape, masked) > activation_bytes(shape, pairs)  # GQA: 14 query heads over 2
    # one float mask in the compute dtype (bf16 here), shared by every layer, for SDPA and eager alike
    assert packed_mask_bytes(row) == packed_mask_bytes(replace(row, attn="eager")) == 4 * 1280 * 1280 * 2
    assert packed_mask_bytes(replace(row, precision="fp32")) == 4 * 1280 * 1280 * 4
    a = estimate(shape, row, "single", num_processes=1, gpus_per_node=1, nodes=1)
    b = estimate(shape, replace(row, packed=False), "single", num_processes=1, gpus_per_node=1, nodes=1)
    assert a.temporary - b.temporary == packed_mask_bytes(row)
