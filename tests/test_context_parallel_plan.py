"""hardware.context_parallel in the spec and the plan: validated with the figures, sized per rank, refused by run.

The plan's figures are checked against the layout restated here (a row padded to 2N chunks, N ranks each
holding two; keys and values of the whole row kept per layer; a [width / N, width] float mask slice) on the
shipped decoder quickstart (SmolLM2-135M's shape, from its packaged GGUF header). Light side: no torch.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rmspec.errors import PlanError
from rmspec.plan import Plan
from rmspec.plan.context_parallel import check_fits, refusal, run_refusal, split_tokens

REPO = Path(__file__).resolve().parents[1]
DECODER = REPO / "specs" / "quickstart_decoder.yaml"
CPU2 = ["hardware.device=cpu", "hardware.gpus_per_node=2", "hardware.cpu_memory_gb=16"]
GIB = 1024**3


def rmspec(*args: str, sets: list[str]) -> subprocess.CompletedProcess:
    argv = [str(Path(sys.executable).parent / "rmspec"), *args]
    for s in sets:
        argv += ["--set", s]
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


@pytest.fixture(scope="module")
def plans() -> tuple[dict, dict]:
    # the same micro batch for both, so a rank's memory compares with one process's
    one = rmspec("plan", str(DECODER), "--json", sets=[*CPU2, "training.micro_batch_size=4"])
    two = rmspec(
        "plan", str(DECODER), "--json", sets=[*CPU2, "training.micro_batch_size=4", "hardware.context_parallel=2"]
    )
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    return json.loads(one.stdout), json.loads(two.stdout)


def test_without_context_parallel_the_plan_has_no_section(plans):
    one, _ = plans
    assert "context_parallel" not in one


def test_the_plan_sizes_a_rank_of_the_split_row(plans):
    one, two = plans
    cp = two["context_parallel"]
    shape = two["model"]["shape"]
    row = one["packing_tokens"]["row_tokens_bound"]  # the prompt-once row the plan sizes
    assert cp["row_tokens"] == row
    width = math.ceil(row / 4) * 4
    assert (cp["padded_tokens"], cp["tokens_per_rank"]) == (width, width // 2)
    rows = two["micro_batch_size"]  # one prompt-once row per pair
    kv_dim = shape["num_key_value_heads"] * shape["head_dim"]
    q_dim = shape["num_attention_heads"] * shape["head_dim"]  # kept repeated to every query head (repeat_kv)
    gathered = shape["num_layers"] * rows * 2 * width * q_dim * 4 / GIB  # fp32 on this CPU plan
    assert cp["gathered_kv_gb"] == pytest.approx(gathered, abs=1e-3)
    assert cp["mask_per_rank_gb"] == pytest.approx(rows * (width // 2) * width * 4 / GIB, abs=1e-3)  # fp32 mask
    # activations are linear in tokens: a rank holds half the row
    assert cp["activations_per_rank_gb"] == pytest.approx(
        cp["activations_one_process_gb"] * (width // 2) / width, rel=0.01
    )
    assert two["memory_per_device_gb"]["activations"] == cp["activations_per_rank_gb"]
    assert two["memory_per_device_gb"]["total"] == cp["total_per_rank_gb"]
    assert cp["total_per_rank_gb"] < one["memory_per_device_gb"]["total"]
    # forward all-gather and backward reduce-scatter: (N-1)/N of each layer's keys and values, twice, and once
    # more for gradient checkpointing's recompute
    passes = 3 if two["gradient_checkpointing"] else 2
    assert cp["kv_passes_per_micro_step"] == passes
    traffic = passes * shape["num_layers"] * 0.5 * rows * 2 * width * kv_dim * 4 * two["gradient_accumulation_steps"]
    traffic /= GIB
    assert cp["communication_gb_per_step"] == pytest.approx(traffic, abs=1e-3)
    assert cp["groups"] == 1
    assert Plan.from_json(two).to_json() == two  # plan.json keeps the section (rmspec run PLAN reads it)
    # the global batch is dealt to the groups, whose ranks take each micro batch together: the one group takes
    # all 8 examples of a step in 2 micro batches of 4, where 2 processes without a split take 4 each at once
    assert (one["micro_batch_size"], one["gradient_accumulation_steps"]) == (4, 1)
    assert (two["micro_batch_size"], two["gradient_accumulation_steps"]) == (4, 2)
    assert cp["examples_per_step"] == two["micro_batch_size"] * two["gradient_accumulation_steps"] * cp["groups"]
    assert cp["examples_per_step"] == two["global_batch_size"] == one["global_batch_size"]
    assert cp["run_refused"] is None and cp["run"].startswith("rmspec run trains it")


def test_the_human_plan_shows_it():
    done = rmspec("plan", str(DECODER), sets=[*CPU2, "hardware.context_parallel=2"])
    assert done.returncode == 0, done.stderr
    assert "2 ranks per row" in done.stdout and "gathered keys and values" in done.stdout
    assert "rmspec run trains it" in done.stdout and "planned only" not in done.stdout
    assert "x 1 context-parallel group(s) of 2 processes = 8 global" in done.stdout


def test_the_batch_is_dealt_to_the_groups_not_the_processes():
    # 4 processes in 2 groups of 2, a global batch of 4: each group takes 2 rows per step, so micro batch 2
    # divides them (4 / 4 processes = 1 would refuse it), and a global batch of 2 splits over the 2 groups
    four = [
        "hardware.device=cpu",
        "hardware.gpus_per_node=4",
        "hardware.cpu_memory_gb=64",
        "hardware.context_parallel=2",
    ]
    done = rmspec(
        "plan", str(DECODER), "--json", sets=[*four, "training.global_batch_size=4", "training.micro_batch_size=2"]
    )
    assert done.returncode == 0, done.stderr
    planned = json.loads(done.stdout)
    assert (planned["micro_batch_size"], planned["gradient_accumulation_steps"]) == (2, 1)
    assert planned["context_parallel"]["examples_per_step"] == 4
    done = rmspec("plan", str(DECODER), "--json", sets=[*four, "training.global_batch_size=2"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["context_parallel"]["examples_per_step"] == 2
    odd = rmspec("plan", str(DECODER), sets=[*four, "training.global_batch_size=4", "training.micro_batch_size=4"])
    assert odd.returncode == 2 and "micro batch 4 x 2 context-parallel groups (4 processes, 2 per group)" in odd.stderr
    # micro_batch_size auto: the largest power of two dividing a group's examples (8 for the one group of 2)
    auto = rmspec("plan", str(DECODER), "--json", sets=[*CPU2, "hardware.context_parallel=2"])
    assert auto.returncode == 0, auto.stderr
    planned = json.loads(auto.stdout)
    assert (planned["micro_batch_size"], planned["gradient_accumulation_steps"]) == (8, 1)
    assert "dividing 8 examples per context-parallel group (of 2 processes)" in planned["micro_batch_reason"]


def test_a_degree_that_does_not_divide_the_processes_is_a_spec_error():
    done = rmspec("validate", str(DECODER), sets=[*CPU2, "hardware.context_parallel=3"])
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "context_parallel 3 does not divide the 2 processes" in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("sets", "reason"),
    [
        (["model.attn_implementation=flash_attention_2", "training.packing=auto"], "takes no custom mask"),
        (["training.packing=off"], "prompt-once rows"),
    ],
)
def test_what_cannot_split_is_refused_at_plan(sets, reason):
    done = rmspec("plan", str(DECODER), sets=[*CPU2, "hardware.context_parallel=2", *sets])
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert reason in out and "Traceback" not in out


def test_an_encoder_is_refused():
    assert "encoder" in (refusal(2, architecture="encoder", attn="sdpa", packed=True, num_processes=2) or "")
    assert refusal(1, architecture="encoder", attn="flash_attention_2", packed=False, num_processes=3) is None
    assert refusal(2, architecture="decoder", attn="eager", packed=True, num_processes=4) is None


def test_a_rank_that_does_not_fit_is_refused_with_the_figures():
    section = {
        "degree": 2,
        "row_tokens": 65536,
        "tokens_per_rank": 32768,
        "total_per_rank_gb": 90.5,
        "activations_per_rank_gb": 60.0,
        "gathered_kv_gb": 8.0,
        "mask_per_rank_gb": 2.0,
    }
    with pytest.raises(PlanError, match=r"65,536 tokens needs 90.50 GB per rank .* over the 72.00 GB usable"):
        check_fits(section, 72.0)
    check_fits(section, 91.0)
    assert split_tokens(346, 2) == (348, 174) and split_tokens(8, 2) == (8, 4)


def test_run_refuses_what_is_not_trained_split(tmp_path):
    # Bradley-Terry on prompt-once rows under DDP trains split, with or without gradient checkpointing
    # (tests/test_context_parallel_run.py), and so do LoRA (tests/test_context_parallel_lora.py) and the extra heads
    # (ODIN, an ensemble: tests/test_context_parallel_heads.py); a judge trained by GRPO is sized by the plan and
    # refused by run.
    sets = [*CPU2, "approach={kind: generative, method: grpo}", "eval.benchmarks=[]", "hardware.context_parallel=2"]
    planned = rmspec("plan", str(DECODER), "--json", sets=sets)
    assert planned.returncode == 0, planned.stderr
    assert "approach.method: grpo" in json.loads(planned.stdout)["context_parallel"]["run_refused"]
    for trained in ("model.lora={r: 8}", "training.gradient_checkpointing=on", "approach.ensemble={members: 2}",
                    "approach.length_debias={kind: odin}", "approach.sft_weight=0.1"):  # fmt: skip
        planned = rmspec("plan", str(DECODER), "--json", sets=[*CPU2, "hardware.context_parallel=2", trained])
        assert planned.returncode == 0 and json.loads(planned.stdout)["context_parallel"]["run_refused"] is None
    done = rmspec("run", str(DECODER), sets=[*sets, f"output.dir={tmp_path}/run"])
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "planned only for this spec: approach.method: grpo" in out and "Traceback" not in out
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"kind": "generative", "method": "grpo"}, "approach.method: grpo is not trained split"),
        ({"strategy": "deepspeed_zero3"}, "strategy 'deepspeed_zero3'"),
    ],
)
def test_run_refusal_names_each_option_not_wired(change, reason):
    from types import SimpleNamespace

    approach = SimpleNamespace(
        kind=change.get("kind", "bradley_terry"), sft_weight=change.get("sft_weight", 0.0), method=change.get("method")
    )
    approach.ensemble, approach.length_debias = change.get("ensemble"), None
    spec = SimpleNamespace(approach=approach, model=SimpleNamespace(lora=change.get("lora")))
    why = run_refusal(spec, change.get("strategy", "ddp"))
    assert why is not None and reason in why
    plain = SimpleNamespace(kind="bradley_terry", sft_weight=0.0, ensemble=None, length_debias=None)
    # trained split (test_fsdp_variants.py)
    for strategy in ("ddp", "fsdp_shard_grad_op", "fsdp_full_shard", "fsdp_full_shard_offload", "fsdp_hybrid_shard"):
        for lora in (None, {"r": 8}):  # LoRA trains split too (test_context_parallel_lora.py)
            assert run_refusal(SimpleNamespace(approach=plain, model=SimpleNamespace(lora=lora)), strategy) is None
    # test_context_parallel_heads.py, test_packing_sft.py
    for heads in ({"ensemble": {"members": 4}}, {"length_debias": {"kind": "odin"}}, {"sft_weight": 0.1}):
        section = SimpleNamespace(**{**vars(plain), **heads})
        assert run_refusal(SimpleNamespace(approach=section, model=SimpleNamespace(lora=None)), "ddp") is None
    # tests/test_context_parallel_listwise.py, test_context_parallel_pointwise.py, test_context_parallel_process.py,
    # test_context_parallel_generative.py (a judge trained by SFT; by GRPO refused above)
    for kind in ("listwise", "pointwise", "process", "generative"):
        section = SimpleNamespace(kind=kind, loss="plackett_luce", method="sft")
        assert run_refusal(SimpleNamespace(approach=section, model=SimpleNamespace(lora=None)), "ddp") is None


# pointwise on the decoder quickstart's model: one scored response per example, the demo's HelpSteer2 rows
POINTWISE = [
    *CPU2,
    "approach={kind: pointwise, attributes: [helpfulness, verbosity]}",
    "data.source.paths=[../rmspec/data/demo/scored.jsonl]",
    "data.mapping={preset: helpsteer2}",
    "data.split={validation_fraction: 0.1, seed: 0}",
    "data.filters=[{kind: drop_empty}, {kind: max_length, policy: truncate_prompt_left}]",
    "eval.benchmarks=[]",
    "training.packing=auto",
]


def test_pointwise_is_packed_only_where_its_rows_are_split():
    sets = [*POINTWISE, "training.micro_batch_size=4", "training.max_length=2048"]
    one = rmspec("plan", str(DECODER), "--json", sets=sets)
    two = rmspec("plan", str(DECODER), "--json", sets=[*sets, "hardware.context_parallel=2"])
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    one, two = json.loads(one.stdout), json.loads(two.stdout)
    # one process: padded sequences, as before the split was built
    assert "context_parallel" not in one and one["packing"] == "off"
    assert (
        one["packing_reason"]
        == "auto: approach pointwise: one sequence per example, no prompt shared between sequences"
    )
    # split: each example one packed row of its one sequence (max_length: no prompt-once row bound to read)
    assert two["packing"] == "shared_prefix" and "split by hardware.context_parallel" in two["packing_reason"]
    assert two["packing_tokens"] is None and two["sequences_per_example"] == 1
    cp = two["context_parallel"]
    assert cp["run_refused"] is None and cp["run"].startswith("rmspec run trains it: pointwise")
    width = math.ceil(two["max_length"] / 4) * 4
    assert (cp["row_tokens"], cp["padded_tokens"], cp["tokens_per_rank"]) == (two["max_length"], width, width // 2)
    shape, rows = two["model"]["shape"], two["micro_batch_size"]
    kv_dim = shape["num_key_value_heads"] * shape["head_dim"]
    layers = 1 if two["gradient_checkpointing"] else shape["num_layers"]  # one layer's, recomputed, with checkpointing
    # on CPU a row over 512 columns attends by blocks: keys and values kept at the key/value heads, and a rank's
    # masks only for the key blocks its mask cuts through (at most 3 of 512 columns per query)
    assert cp["gathered_kv_gb"] == pytest.approx(layers * rows * 2 * width * kv_dim * 4 / GIB, abs=1e-3)
    assert cp["mask_per_rank_gb"] == pytest.approx(rows * (width // 2) * 3 * 512 * 4 / GIB, abs=1e-3)
    assert two["memory_per_device_gb"]["total"] == cp["total_per_rank_gb"]
    # the one-process figures are the padded sequence one process trains (no mask; keys and values at the KV heads,
    # where a packed row's are repeated to the query heads), the one-process plan's own
    assert (one["strategy"], one["gradient_checkpointing"]) == (two["strategy"], two["gradient_checkpointing"])
    assert cp["activations_one_process_gb"] == one["memory_per_device_gb"]["activations"]
    assert cp["mask_one_process_gb"] == 0 < cp["mask_per_rank_gb"]
    # by blocks a rank's activations are its half of the row's, keys and values at the same width as one process's
    assert cp["activations_per_rank_gb"] == pytest.approx(cp["activations_one_process_gb"] / 2, abs=2e-3)
    off = rmspec("plan", str(DECODER), sets=[*POINTWISE, "hardware.context_parallel=2", "training.packing=off"])
    assert off.returncode == 2 and "prompt-once rows" in off.stdout + off.stderr


def test_auto_splits_pointwise_rows_where_a_padded_one_does_not_fit():
    # 16,384 tokens with checkpointing on 2 processes of 5.75 GB: one padded sequence needs 5.3 GB per process, a
    # rank's half of the packed row (its mask slice and gathered keys and values included) 5.0 GB
    sets = [
        *POINTWISE,
        "hardware.cpu_memory_gb=11.5",
        "training.max_length=16384",
        "training.gradient_checkpointing=on",
    ]
    done = rmspec("plan", str(DECODER), "--json", sets=sets)
    assert done.returncode == 0, done.stderr
    planned = json.loads(done.stdout)
    cp = planned["context_parallel"]
    assert cp["degree"] == 2 and planned["packing"] == "shared_prefix" and cp["run_refused"] is None
    assert "needs 5.3 GB per process at N=1" in cp["chosen"] and cp["total_per_rank_gb"] <= planned["device_usable_gb"]
    assert cp["mask_per_rank_gb"] > 0 and cp["mask_one_process_gb"] == 0
    whole = rmspec("plan", str(DECODER), sets=[*sets, "hardware.context_parallel=1"])
    assert whole.returncode == 2 and "nothing fits" in whole.stdout + whole.stderr


def test_a_process_reward_model_is_packed_only_where_its_rows_are_split():
    sets = [
        *CPU2,
        "approach={kind: process}",
        "data.source.paths=[../rmspec/data/demo/prm_steps.jsonl]",
        "data.mapping={preset: stepwise}",
        "data.split={validation_fraction: 0.1, seed: 0}",
        "data.filters=[{kind: drop_empty}]",
        "eval.benchmarks=[]",
        "training.packing=auto",
    ]
    one = rmspec("plan", str(DECODER), "--json", sets=sets)
    two = rmspec("plan", str(DECODER), "--json", sets=[*sets, "hardware.context_parallel=2"])
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    one, two = json.loads(one.stdout), json.loads(two.stdout)
    assert "context_parallel" not in one and one["packing"] == "off"
    assert two["packing"] == "shared_prefix" and two["packing_tokens"] is None
    cp = two["context_parallel"]
    assert cp["run_refused"] is None and cp["run"].startswith("rmspec run trains it: process")
    assert cp["mask_one_process_gb"] == 0 and cp["row_tokens"] == two["max_length"]


JUDGE = [
    *CPU2,
    "data.source.paths=[../rmspec/data/demo/judge_messages.jsonl]",
    "data.mapping={preset: messages}",
    "data.split={validation_fraction: 0.1, seed: 0}",
    "data.filters=[{kind: drop_empty}]",
    "eval.benchmarks=[]",
    "training.packing=auto",
]


def test_a_generative_judge_is_packed_only_where_its_rows_are_split():
    sets = [*JUDGE, "approach={kind: generative}", "training.micro_batch_size=2", "training.max_length=2048"]
    sets += ["training.gradient_checkpointing=on"]  # the same in both plans, so their activations compare
    one = rmspec("plan", str(DECODER), "--json", sets=sets)
    two = rmspec("plan", str(DECODER), "--json", sets=[*sets, "hardware.context_parallel=2"])
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    one, two = json.loads(one.stdout), json.loads(two.stdout)
    assert "context_parallel" not in one and one["packing"] == "off"
    assert two["packing"] == "shared_prefix" and two["packing_tokens"] is None and two["sequences_per_example"] == 1
    cp = two["context_parallel"]
    assert cp["run_refused"] is None and cp["run"].startswith("rmspec run trains it: generative")
    assert cp["mask_one_process_gb"] == 0 < cp["mask_per_rank_gb"] and cp["row_tokens"] == two["max_length"]
    # the one-process figures are the padded sequence one process trains; a rank holds about half its activations
    assert cp["activations_one_process_gb"] == one["memory_per_device_gb"]["activations"]
    assert cp["activations_per_rank_gb"] == pytest.approx(cp["activations_one_process_gb"] / 2, abs=2e-3)  # by blocks
    # a judge trained by GRPO is sized split and refused by run, with the reason
    grpo_sets = [
        *CPU2,
        "approach={kind: generative, method: grpo}",
        "eval.benchmarks=[]",
        "hardware.context_parallel=2",
    ]
    grpo = rmspec("plan", str(DECODER), "--json", sets=grpo_sets)  # the quickstart's pairs
    assert grpo.returncode == 0, grpo.stderr
    assert "approach.method: grpo is not trained split" in json.loads(grpo.stdout)["context_parallel"]["run_refused"]
