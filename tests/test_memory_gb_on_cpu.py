"""hardware.memory_gb on device cpu: alone it is the host RAM the plan sizes (as cpu_memory_gb is);
together with cpu_memory_gb one of the two was silently ignored (the field walker found memory_gb
doing nothing), so both on a CPU spec are refused with the one to keep."""

from __future__ import annotations

from helpers import REPO
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

SPEC = REPO / "specs" / "quickstart.yaml"  # hardware.device: cpu
HOST = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)


def plan(sets):
    return compile_plan(load_spec(SPEC, sets), host=HOST, sets=sets)


def test_memory_gb_alone_is_the_host_ram():
    p = plan(["hardware.memory_gb=12"])
    assert p.hardware.memory_gb == 12 and p.device_capacity_gb == 12
    assert plan(["hardware.memory_gb=24"]).device_capacity_gb == 24


def test_memory_gb_with_cpu_memory_gb_is_refused(cli):
    result = cli("validate", SPEC, "--set", "hardware.memory_gb=12", "--set", "hardware.cpu_memory_gb=16")
    assert result.code == 2, result.out + result.err
    text = result.out + result.err
    assert "hardware.memory_gb" in text and "cpu_memory_gb" in text and "delete" in text
