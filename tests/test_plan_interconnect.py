"""hardware.interconnect changes the time estimate of a multi-GPU plan by the bytes its strategy moves
over the link (rmspec.plan.communication); it used to change only the echoed field. The expected
difference is computed here from the ring formulas and the link bandwidths, not read from the module."""

from __future__ import annotations

import pytest

from helpers import REPO
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

HOST = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)
GB_S = {"nvlink": 450e9, "ethernet": 12.5e9, "pcie": 25e9, "infiniband": 50e9}


def plan(spec: str, sets: list[str]):
    return compile_plan(load_spec(REPO / "specs" / spec, sets), host=HOST, sets=sets)


def test_ddp_all_reduce_once_per_step():
    base = ["hardware.gpus_per_node=8", "hardware.strategy=ddp"]
    fast, slow = (
        plan("hh_bt.yaml", [*base, "hardware.interconnect=nvlink"]),
        plan("hh_bt.yaml", [*base, "hardware.interconnect=ethernet"]),
    )
    assert fast.strategy == slow.strategy == "ddp" and fast.num_processes == 8
    n = 8
    grad_bytes = 4 if fast.master_weights_fp32 else 2  # fp32 master weights: fp32 gradients
    moved = 2 * (n - 1) / n * fast.model.trainable_parameters * grad_bytes
    expected = moved / GB_S["ethernet"] - moved / GB_S["nvlink"]
    got = slow.estimate["seconds_per_step"] - fast.estimate["seconds_per_step"]
    assert got == pytest.approx(expected, abs=2e-4)
    assert slow.estimate["compute_seconds_per_step"] == fast.estimate["compute_seconds_per_step"]
    assert fast.estimate["communication"]["bytes_per_step"] == pytest.approx(moved, rel=1e-9)


def test_fsdp_gathers_and_reduce_scatters_every_micro_step():
    base = ["hardware.device=h100-80gb", "hardware.nodes=1"]
    ib, eth = (
        plan("ultrafeedback_bt.yaml", [*base, "hardware.interconnect=infiniband"]),
        plan("ultrafeedback_bt.yaml", [*base, "hardware.interconnect=ethernet"]),
    )
    assert ib.strategy == "fsdp_shard_grad_op", ib.strategy
    n = ib.num_processes
    per_micro = (n - 1) / n * (ib.model.num_parameters + ib.model.trainable_parameters) * 2  # bf16 gather/reduce
    moved = per_micro * ib.gradient_accumulation_steps
    expected = moved / GB_S["ethernet"] - moved / GB_S["infiniband"]
    got = eth.estimate["seconds_per_step"] - ib.estimate["seconds_per_step"]
    assert got == pytest.approx(expected, rel=1e-3)


def test_one_device_and_cpu_have_no_communication():
    one = plan("hh_bt.yaml", ["hardware.gpus_per_node=1", "hardware.interconnect=ethernet"])
    assert "communication" not in one.estimate
    assert one.estimate == plan("hh_bt.yaml", ["hardware.gpus_per_node=1"]).estimate
    cpu = plan(
        "quickstart.yaml", ["hardware.gpus_per_node=2", "hardware.cpu_memory_gb=64", "hardware.interconnect=ethernet"]
    )
    assert "communication" not in cpu.estimate


def test_plan_view_shows_communication(cli):
    result = cli("plan", REPO / "specs" / "hh_bt.yaml", "--set", "hardware.interconnect=pcie")
    assert result.code == 0, result.err
    assert any("communication" in line and "pcie at 25 GB/s" in line for line in result.out.splitlines())
