"""FSDP2 on two CPU processes (test-only shim, tests/helpers/fsdp_cpu_shim.py) with LoRA, with
shared-prefix packing, with activation checkpointing, and with each packed row split over both processes
(hardware.context_parallel: 2) under activation checkpointing, each against one process on the same
full-batch SGD run (see tests/test_fsdp_cpu.py for the plain case, the resume and the offload)."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.fsdp_runs import explain, losses, plan_fsdp_on_cpu, rmspec_run, run_env, status, write_spec
from helpers.models import build_model

STEPS = 2
CKPT = "_checkpoint_wrapped_module."  # accelerate's checkpoint wrapper in parameter names


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("fsdp-variants")
    return root, build_model("llama", root / "model-src")


def _run(base, name: str, *, fsdp: bool, check: bool = True, procs: int = 2, hook: dict | None = None, **options):
    root, model = base
    spec = write_spec(root, model, name=name, procs=procs if fsdp else 1, steps=STEPS, **options)
    target = plan_fsdp_on_cpu(spec, **(hook or {})) if fsdp else spec
    done = rmspec_run(str(target), cwd=root, env=run_env(root / f"rec-{name}", shim=fsdp))
    run = root / "runs" / name
    if check:
        assert done.returncode == 0, explain(done, run)
    return run, root / f"rec-{name}", done


def _same_training(sharded, single, mesh: tuple[int, ...] = (2,)) -> dict:
    """Every parameter sharded on ``mesh``, and gradients of step 1 and logged losses as one process has them."""
    facts = json.loads((sharded[1] / "rank0_params.json").read_text())
    assert all(f["dtensor"] and f["mesh_shape"] == list(mesh) for f in facts.values())
    got = {k.replace(CKPT, ""): v for k, v in torch.load(sharded[1] / "grads_step1.pt").items()}
    want = torch.load(single[1] / "grads_step1.pt")
    assert got.keys() == want.keys() and want
    for name, grad in want.items():
        # LoRA's B starts at zero, so A's first gradient is zero by construction (B's and the head's are not)
        assert "lora_A" in name or grad.abs().sum() > 0, name
        torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    want_loss = losses(single[0])
    assert losses(sharded[0]) == pytest.approx(want_loss, rel=1e-5, abs=1e-6) and len(want_loss) == STEPS
    return facts


@pytest.fixture(scope="module")
def single(base):
    return _run(base, "single", fsdp=False)


def test_activation_checkpointing_under_fsdp_trains_as_one_process(base, single):
    sharded = _run(base, "ckpt", fsdp=True, checkpointing="on")
    plan = json.loads((sharded[0] / "plan.json").read_text())
    assert plan["accelerate_config"]["fsdp_config"]["fsdp_activation_checkpointing"] is True
    facts = _same_training(sharded, single)
    assert any(CKPT in name for name in facts)  # accelerate wrapped the decoder layers
    assert status(sharded[0])["state"] == "completed"


@pytest.fixture(scope="module")
def single_packed(base):
    return _run(base, "single-packed", fsdp=False, packing="shared_prefix")


def test_shared_prefix_packing_under_fsdp_trains_as_one_process(base, single_packed):
    sharded = _run(base, "packed", fsdp=True, packing="shared_prefix")
    assert json.loads((sharded[0] / "plan.json").read_text())["packing"] == "shared_prefix"
    _same_training(sharded, single_packed)
    assert status(sharded[0])["state"] == "completed"


def test_context_parallel_under_fsdp_with_checkpointing_trains_as_one_process(base, single_packed):
    """Both processes hold every row split (one group of 2), FSDP shards every parameter over them, and
    accelerate's activation checkpointing recomputes each layer's split forward in the backward: the
    gradients of step 1 and the losses are the one process's."""
    sharded = _run(base, "cp", fsdp=True, packing="shared_prefix", checkpointing="on", context_parallel=2)
    plan = json.loads((sharded[0] / "plan.json").read_text())
    assert plan["context_parallel"]["degree"] == 2 and plan["context_parallel"]["run_refused"] is None
    assert plan["accelerate_config"]["fsdp_config"]["fsdp_activation_checkpointing"] is True
    facts = _same_training(sharded, single_packed)
    assert any(CKPT in name for name in facts)
    assert status(sharded[0])["state"] == "completed"


def test_context_parallel_under_fsdp_with_cpu_offload_trains_as_one_process(base, single_packed):
    """fsdp_full_shard_offload (the shim's CPUOffloadPolicy without pinned memory: tests/test_fsdp_cpu.py) with
    each row split over both processes: the parameters and their gradients live on the host between steps,
    the split forward and the group's scaling are the same, and step 1's gradients and the losses are one
    process's."""
    hook = {"strategy": "fsdp_full_shard_offload"}
    sharded = _run(base, "cp-offload", fsdp=True, packing="shared_prefix", context_parallel=2, hook=hook)
    plan = json.loads((sharded[0] / "plan.json").read_text())
    assert plan["context_parallel"]["degree"] == 2
    assert plan["accelerate_config"]["fsdp_config"]["fsdp_offload_params"] is True
    _same_training(sharded, single_packed)
    assert status(sharded[0])["state"] == "completed"


def test_hybrid_shard_with_context_parallel_on_a_2d_mesh_trains_as_one_process(base, single_packed):
    """fsdp_hybrid_shard with each row split over 2 processes, on 4 processes that stand for 2 nodes of 2: FSDP2's
    mesh is 2 replicas x 2 shards (each parameter replicated across the "nodes", sharded within each), each node
    is one context-parallel group, and the 2 groups take half the global batch each. The gradients of step 1 and
    the losses are the one process's: FSDP's reduce-scatter within a node and all-reduce across nodes average
    over the 4 processes, and sum_over_group makes a group's 2 shares add up."""
    sharded = _run(
        base,
        "hsdp-cp",
        fsdp=True,
        procs=4,
        hook={"strategy": "fsdp_hybrid_shard", "replicas": 2},
        packing="shared_prefix",
        context_parallel=2,
    )
    plan = json.loads((sharded[0] / "plan.json").read_text())
    assert plan["strategy"] == "fsdp_hybrid_shard" and plan["context_parallel"]["degree"] == 2
    assert plan["accelerate_config"]["parallelism_config"] == {
        "parallelism_config_dp_replicate_size": 2,
        "parallelism_config_dp_shard_size": 2,
    }
    facts = _same_training(sharded, single_packed, mesh=(2, 2))
    assert all(f["placements"] == ["R", "S(0)"] for f in facts.values())  # Replicate(), Shard(dim=0)
    # each rank holds half of a parameter (the shard dimension is 2), not the quarter flat FSDP over 4 would hold
    shapes = [(f["local_shape"][0], f["global_shape"][0]) for f in facts.values() if f["global_shape"][0] % 2 == 0]
    assert shapes and all(local * 2 == whole for local, whole in shapes)
    assert status(sharded[0])["state"] == "completed"


def test_hybrid_shard_alone_deals_every_process_its_own_rows_as_one_process(base, single):
    """fsdp_hybrid_shard without context parallelism, 4 processes as 2 nodes of 2: accelerate's own loader deals the
    global batch to the 4 data-parallel processes of the 2 x 2 mesh, and the first step's gradients and the losses
    are the one process's (a process that saw another's rows, or a replica that reduced only its shard group,
    would show here)."""
    sharded = _run(base, "hsdp", fsdp=True, procs=4, hook={"strategy": "fsdp_hybrid_shard", "replicas": 2})
    facts = _same_training(sharded, single, mesh=(2, 2))
    assert all(f["placements"] == ["R", "S(0)"] for f in facts.values())
    assert status(sharded[0])["state"] == "completed"


@pytest.fixture(scope="module")
def lora_runs(base):
    single_lora = _run(base, "single-lora", fsdp=False, lora=True)
    sharded = _run(base, "lora", fsdp=True, lora=True, check=False)
    return sharded, single_lora


def test_lora_under_fsdp_trains_as_one_process(lora_runs):
    sharded, single_lora = lora_runs
    facts = _same_training(sharded, single_lora)
    trained = {n for n, f in facts.items() if f["requires_grad"]}
    assert any("lora_A" in n for n in trained) and any("score" in n for n in trained)
    assert not any(f["requires_grad"] for n, f in facts.items() if "lora_" not in n and "score" not in n)


def test_lora_under_fsdp_saves_the_merged_model_and_its_head(lora_runs):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    from helpers.fsdp_recorder import PROBE_IDS, PROBE_MASK

    sharded, single_lora = lora_runs
    run, rec, done = sharded
    assert done.returncode == 0, explain(done, run)  # the save gathers FSDP2's shards before merging
    final = torch.load(rec / "final.pt")
    saved = load_file(run / "model" / "model.safetensors")
    head = next(v for k, v in final["params"].items() if k.endswith("score.modules_to_save.default.weight"))
    assert torch.equal(saved["score.weight"].float(), head)  # the head the ranks held
    assert not any("lora_" in k for k in saved)  # merged: plain transformers loads it
    model = AutoModelForSequenceClassification.from_pretrained(run / "model").eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(PROBE_IDS), attention_mask=torch.tensor(PROBE_MASK)).logits
    torch.testing.assert_close(logits, final["logits"], rtol=1e-4, atol=1e-5)  # merging reorders the sums
    reference = load_file(single_lora[0] / "model" / "model.safetensors")
    assert saved.keys() == reference.keys()
    for name, value in reference.items():
        torch.testing.assert_close(saved[name], value, rtol=1e-4, atol=1e-5, msg=name)
