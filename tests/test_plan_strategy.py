"""Precision, strategy ladder and batch split: each checked against the memory model it rests on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmspec.errors import PlanError
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts, detect_host, hardware_profile
from rmspec.plan.memory import GIB
from rmspec.plan.strategy import ladder
from rmspec.spec import load_spec

SPECS = Path(__file__).resolve().parents[1] / "specs"
NO_HOST = HostFacts(cpu_bf16_flags=(), ram_gb=64.0, gpus=(), cpu_count=8)


def plan(spec="hh_bt.yaml", *sets, host=NO_HOST):
    return compile_plan(load_spec(SPECS / spec, list(sets)), host=host).to_json()


def test_precision_per_device():
    assert plan("hh_bt.yaml")["precision"] == "bf16"
    t4 = plan("hh_bt.yaml", "hardware.device=t4-16gb", "hardware.gpus_per_node=8", "training.max_length=256")
    assert t4["precision"] == "fp16" and "no native bf16" in t4["precision_reason"]
    cpu = plan("quickstart.yaml", "hardware.cpu_memory_gb=16")
    assert cpu["precision"] == "fp32" and cpu["accelerate_config"]["mixed_precision"] == "no"
    forced = plan("hh_bt.yaml", "model.dtype=float32")
    assert forced["precision"] == "fp32" and "model.dtype" in forced["precision_reason"]


def test_cpu_bf16_follows_detection_on_auto_and_the_catalog_on_cpu():
    flagged = HostFacts(cpu_bf16_flags=("avx512_bf16", "amx_bf16"), ram_gb=24.0, gpus=(), cpu_count=2)
    auto = plan("quickstart.yaml", "hardware.device=auto", host=flagged)
    assert auto["precision"] == "bf16" and "amx_bf16" in auto["precision_reason"]
    assert auto["device_capacity_gb"] == 24.0 and auto["accelerate_config"]["mixed_precision"] == "bf16"
    plain = plan("quickstart.yaml", "hardware.device=auto", host=NO_HOST)
    assert plain["precision"] == "fp32" and "no native bf16" in plain["precision_reason"]
    named = plan("quickstart.yaml", "hardware.cpu_memory_gb=16", host=flagged)  # device: cpu, the catalog's facts
    assert named["precision"] == "fp32" and "device: auto" in named["precision_reason"]
    forced = plan("quickstart.yaml", "hardware.cpu_memory_gb=16", "hardware.bf16=true", host=NO_HOST)
    assert forced["precision"] == "bf16" and "hardware.bf16" in forced["precision_reason"]


def test_detect_host_reads_proc_without_torch():
    host = detect_host()
    assert host.ram_gb is None or host.ram_gb > 0.5
    assert host.cpu_count >= 1


def test_auto_detects_gpus_from_nvidia_smi_facts():
    host = HostFacts((), 512.0, (("NVIDIA H100 80GB HBM3", 79.6),) * 8, 64)
    spec = load_spec(SPECS / "hh_bt.yaml", ["hardware.device=auto"]).spec
    hw = hardware_profile(spec.hardware, host)
    assert (hw.device, hw.gpus_per_node, hw.bf16_native) == ("h100-80gb", 8, True)


def test_ladder_order():
    spec = load_spec(SPECS / "hh_bt.yaml").spec
    hw = hardware_profile(spec.hardware, NO_HOST)
    assert [r.label for r in ladder(hw, "auto")] == [
        "ddp",
        "fsdp_shard_grad_op",
        "fsdp_full_shard",
        "fsdp_full_shard + checkpointing",
        "fsdp_full_shard_offload + checkpointing",
    ]
    one = hardware_profile(load_spec(SPECS / "hh_bt.yaml", ["hardware.gpus_per_node=1"]).spec.hardware, NO_HOST)
    assert [r.label for r in ladder(one, "off")] == ["single", "fsdp_full_shard_offload"]


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("hardware.gpus_per_node=2",),
        ("hardware.device=a10g-24gb", "hardware.gpus_per_node=4"),
        ("hardware.nodes=4",),
        ("training.global_batch_size=512", "hardware.nodes=2"),
    ],
)
def test_batch_arithmetic(sets):
    p = plan("hh_bt.yaml", *sets)
    assert p["micro_batch_size"] * p["gradient_accumulation_steps"] * p["num_processes"] == p["global_batch_size"]
    per_process = p["global_batch_size"] // p["num_processes"]
    m = p["micro_batch_size"]
    assert m & (m - 1) == 0 and per_process % m == 0
    assert p["tokens_per_step"] == p["global_batch_size"] * 2 * p["max_length"]


def test_micro_batch_is_the_largest_that_fits():
    from rmspec.plan.catalog import catalog_config
    from rmspec.plan.memory import TrainingShape
    from rmspec.plan.model_shape import shape_from_config
    from rmspec.plan.strategy import Rung, evaluate

    # Two sequences per pair, as the hand-built TrainingShape below (packed rows are tested in test_packing_plan).
    loaded = load_spec(SPECS / "ultrafeedback_bt.yaml", ("training.packing=off",))
    p = compile_plan(loaded, host=NO_HOST).to_json()

    shape = shape_from_config(catalog_config("meta-llama/Llama-3.1-8B-Instruct")[1], "x")
    hw = hardware_profile(loaded.spec.hardware, NO_HOST)
    base = TrainingShape(1, 2, 2048, "score", "bf16", False, False)
    rung = Rung(p["strategy"], p["gradient_checkpointing"])
    m = p["micro_batch_size"]
    assert evaluate(shape, base, rung, hw, m, 256).total <= hw.usable_gb * GIB
    if m * 2 <= 256 // hw.num_processes:
        assert evaluate(shape, base, rung, hw, 2 * m, 256).total > hw.usable_gb * GIB
    assert p["memory_per_device_gb"]["total"] == pytest.approx(
        evaluate(shape, base, rung, hw, m, 256).total / GIB, abs=1e-3
    )
    # every refused rung really did not fit at micro batch 1
    for refused in p["refused"]:
        assert "usable" in refused["reason"]


def test_8b_on_8x80gb_refuses_ddp_and_shards():
    p = plan("ultrafeedback_bt.yaml", "hardware.nodes=1")
    assert p["refused"][0]["strategy"] == "ddp"
    assert p["strategy"].startswith("fsdp")
    assert p["accelerate_config"]["distributed_type"] == "FSDP"


def test_indivisible_global_batch_names_multiples():
    from rmspec.plan.strategy import check_batch

    hw = hardware_profile(load_spec(SPECS / "hh_bt.yaml").spec.hardware, NO_HOST)
    with pytest.raises(PlanError) as err:
        check_batch(100, hw, None)
    assert "96 or 104" in err.value.hint
    with pytest.raises(PlanError) as err:
        check_batch(128, hw, 3)
    assert "divisor of 16" in err.value.hint


def test_nothing_fits_names_alternatives_that_do_fit():
    with pytest.raises(PlanError) as err:
        plan(
            "ultrafeedback_bt.yaml",
            "model.name_or_path=meta-llama/Llama-3.1-70B-Instruct",
            "hardware.device=rtx4090-24gb",
            "hardware.gpus_per_node=1",
            "hardware.nodes=1",
            "hardware.cpu_memory_gb=64",
            "training.global_batch_size=64",
        )
    hint = err.value.hint
    assert "more GPUs" in hint
    nodes, per_node = map(int, re.search(r"more GPUs: (\d+) node\(s\) x (\d+)", hint).groups())
    # The suggestion, applied, plans.
    ok = plan(
        "ultrafeedback_bt.yaml",
        "model.name_or_path=meta-llama/Llama-3.1-70B-Instruct",
        "hardware.device=rtx4090-24gb",
        f"hardware.gpus_per_node={per_node}",
        f"hardware.nodes={nodes}",
        "hardware.cpu_memory_gb=64",
        f"training.global_batch_size={64 * nodes * per_node}",
    )
    assert ok["memory_per_device_gb"]["total"] <= ok["device_usable_gb"]


def test_shorter_max_length_alternative_is_real():
    sets = [
        "hardware.device=l4-24gb",
        "hardware.gpus_per_node=1",
        "model.name_or_path=Qwen/Qwen2.5-0.5B-Instruct",
        "training.max_length=16384",
        "hardware.cpu_memory_gb=16",
        "training.gradient_checkpointing=off",
    ]
    with pytest.raises(PlanError) as err:
        plan("hh_bt.yaml", *sets)
    found = re.search(r"training.max_length: (\d+)", err.value.hint)
    assert found, err.value.hint
    fixed = plan("hh_bt.yaml", *sets, f"training.max_length={found.group(1)}")
    assert fixed["memory_per_device_gb"]["total"] <= fixed["device_usable_gb"]
    # Activations dominate here: more GPUs would not help, so they are not suggested.
    assert "more GPUs" not in err.value.hint
    assert "gradient_checkpointing: auto" in err.value.hint
    assert plan("hh_bt.yaml", *sets[:-1])["gradient_checkpointing"] is True


def test_hardware_strategy_forces_one_rung_and_reaches_deepspeed():
    p = plan("ultrafeedback_bt.yaml", "hardware.strategy=deepspeed_zero3")
    assert p["strategy"] == "deepspeed_zero3" and "hardware.strategy" in p["strategy_reason"]
    assert p["accelerate_config"]["distributed_type"] == "DEEPSPEED"
    assert p["accelerate_config"]["deepspeed_config"]["gradient_accumulation_steps"] == p["gradient_accumulation_steps"]
    forced_ddp = plan("hh_bt.yaml", "hardware.strategy=fsdp_full_shard")
    assert forced_ddp["strategy"] == "fsdp_full_shard" and forced_ddp["refused"] == []


@pytest.mark.parametrize(
    "sets,needle",
    [
        (("hardware.strategy=single",), "uses one device"),
        (("hardware.strategy=ddp", "hardware.gpus_per_node=1"), "needs more than one process"),
    ],
)
def test_impossible_forced_strategies_are_refused(sets, needle):
    with pytest.raises(PlanError, match=needle):
        plan("hh_bt.yaml", *sets)
    with pytest.raises(PlanError, match="does not run on CPU"):
        plan("quickstart.yaml", "hardware.gpus_per_node=2", "hardware.strategy=fsdp_full_shard")


def test_forced_strategy_that_does_not_fit_exits_with_alternatives():
    with pytest.raises(PlanError) as err:
        plan("ultrafeedback_bt.yaml", "hardware.strategy=ddp")
    assert "ddp" in err.value.message and "what would fit" in err.value.hint


@pytest.mark.parametrize(
    "name,mem,key",
    [
        ("NVIDIA H100 80GB HBM3", 79.6, "h100-80gb"),
        ("NVIDIA A100-SXM4-40GB", 39.4, "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", 79.2, "a100-80gb"),
        ("NVIDIA GeForce RTX 4090", 23.99, "rtx4090-24gb"),
        ("NVIDIA L4", 22.5, "l4-24gb"),
        ("NVIDIA L40S", 44.99, "l40s-48gb"),
        ("NVIDIA RTX A6000", 47.99, "a6000-48gb"),
        ("Tesla T4", 15.0, "t4-16gb"),
        ("NVIDIA Mystery 99GB", 99.0, None),
    ],
)
def test_nvidia_smi_names_map_to_the_catalog(name, mem, key):
    from rmspec.plan.hardware import _gpu_key

    assert _gpu_key(name, mem) == key


def test_unknown_detected_gpu_is_planned_as_custom():
    host = HostFacts((), 256.0, (("NVIDIA Mystery 99GB", 99.0),) * 2, 32)
    # gpus_per_node left at its default: the detected count is used
    spec = load_spec(SPECS / "hh_bt.yaml", ["hardware.device=auto", "hardware.gpus_per_node=1"]).spec
    hw = hardware_profile(spec.hardware, host)
    assert (hw.device, hw.memory_gb, hw.gpus_per_node) == ("custom", 99.0, 2)
