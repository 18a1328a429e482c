"""Host memory in the plan: an offload plan lives in host RAM. With hardware.cpu_memory_gb set, a plan
that needs more refuses to fit (its alternatives re-planned and shown to fit); unset with a named
device, the plan view and the plan JSON warn that the need is unchecked; silent when it fits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmspec.errors import PlanError
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

SPEC = Path(__file__).resolve().parents[1] / "specs" / "ultrafeedback_bt.yaml"
HOST = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)
GIB = 1024**3
# 70B on one RTX 4090: only full-shard CPU offload fits the GPU.
ONE_4090 = [
    "model.name_or_path=meta-llama/Llama-3.1-70B-Instruct",
    "hardware.device=rtx4090-24gb",
    "hardware.nodes=1",
    "hardware.gpus_per_node=1",
    "training.global_batch_size=64",
]


def _plan(sets: list[str]) -> dict:
    return compile_plan(load_spec(SPEC, sets), host=HOST, sets=sets).to_json()


def _offload_need_gb(plan: dict) -> float:
    """By hand: model dtype bf16 (no fp32 master) keeps weights 2 + gradients 2 + AdamW moments 4 bytes per
    trained parameter, all on the host, for each of the node's GPUs' shards (one GPU: the whole model)."""
    assert plan["mixed_precision"] == "bf16" and plan["master_weights_fp32"] is False
    per_gpu = 8 * plan["model"]["trained_parameters"] / plan["num_processes"]
    return per_gpu * plan["processes_per_node"] / GIB


def test_unset_host_memory_warns_in_the_json_and_the_view(cli):
    plan = _plan(ONE_4090)
    assert plan["strategy"] == "fsdp_full_shard_offload"
    assert plan["cpu_memory_per_node_gb"] == pytest.approx(_offload_need_gb(plan), rel=1e-3)
    assert plan["cpu_memory_usable_gb"] is None
    [warning] = plan["warnings"]
    assert "unchecked" in warning and "hardware.cpu_memory_gb" in warning
    assert f"{plan['cpu_memory_per_node_gb']:.1f} GB" in warning

    shown = cli("plan", str(SPEC), *[arg for s in ONE_4090 for arg in ("--set", s)])
    assert shown.code == 0, shown.err
    text = " ".join(shown.out.split())
    assert "(unchecked: hardware.cpu_memory_gb not set)" in text
    assert "warning: host RAM unchecked" in text


def test_host_memory_too_small_refuses_and_every_alternative_fits(cli):
    sets = ONE_4090 + ["hardware.cpu_memory_gb=256"]
    need = _offload_need_gb(_plan(ONE_4090))
    with pytest.raises(PlanError) as refused:
        _plan(sets)
    message, hint = refused.value.message, refused.value.hint
    assert f"offload needs {need:.0f} GB host RAM per node, {256 * 0.9:.0f} GB usable" in message
    # Each alternative the hint names is planned again with the same 256 GB and fits, host RAM included.
    alternatives = re.findall(r"- (.*)", hint)
    assert any(a.startswith("more GPUs") for a in alternatives) and any(a.startswith("LoRA") for a in alternatives)
    for alternative in alternatives:
        if alternative.startswith("more GPUs"):
            nodes, per_node = map(int, re.match(r"more GPUs: (\d+) node\(s\) x (\d+)", alternative).groups())
            extra = [
                f"hardware.nodes={nodes}",
                f"hardware.gpus_per_node={per_node}",
                f"training.global_batch_size={64 * nodes * per_node}",
            ]
        elif alternative.startswith("LoRA"):
            extra = ["model.lora={r: 16}", "model.dtype=auto"]
        elif alternative.startswith("CPU offload with"):
            ram = re.search(r"with (\d+) GB", alternative).group(1)
            extra = [f"hardware.cpu_memory_gb={ram}"]
        else:
            continue
        plan = _plan(sets + extra)
        assert plan["memory_per_device_gb"]["total"] <= plan["device_usable_gb"], alternative
        usable = plan["cpu_memory_usable_gb"]
        assert usable is not None and plan["cpu_memory_per_node_gb"] <= usable, alternative
        host = re.search(r"host (\d+) GB per node", alternative)
        if host:
            assert plan["cpu_memory_per_node_gb"] == pytest.approx(float(host.group(1)), abs=0.5), alternative
        assert plan["warnings"] == []

    shown = cli("plan", str(SPEC), *[arg for s in sets for arg in ("--set", s)])
    assert shown.code == 2 and "host RAM per node" in shown.err and "Traceback" not in shown.err


def test_enough_host_memory_is_silent_and_shown_as_checked(cli):
    sets = ONE_4090 + ["hardware.cpu_memory_gb=2048"]
    plan = _plan(sets)
    assert plan["strategy"] == "fsdp_full_shard_offload" and plan["warnings"] == []
    assert plan["cpu_memory_usable_gb"] == pytest.approx(2048 * 0.9)
    shown = cli("plan", str(SPEC), *[arg for s in sets for arg in ("--set", s)])
    text = " ".join(shown.out.split())
    assert f"of {2048 * 0.9:.1f} GB usable" in text and "warning" not in text


def test_a_plan_without_offload_needs_no_host_memory_warning():
    plan = _plan(["hardware.device=h100-80gb", "hardware.nodes=1"])
    assert plan["cpu_memory_per_node_gb"] == 0 and plan["warnings"] == []
