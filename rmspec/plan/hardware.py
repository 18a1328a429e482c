"""The hardware profile a plan is computed for: from the spec's catalog device, or detected.

Detection never imports torch: CPU flags and RAM come from /proc, GPUs from `nvidia-smi`
when it is on PATH. A plan records the profile it used, so the plan stays a pure function
of (spec, hardware profile, model shape).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from rmspec.errors import PlanError
from rmspec.spec.hardware import DEVICE_CATALOG

GIB = 1024**3


@dataclass(frozen=True)
class HostFacts:
    """What this machine has, read without torch."""

    cpu_bf16_flags: tuple[str, ...]  # avx512_bf16 / amx_bf16 when the CPU reports them
    ram_gb: float | None
    gpus: tuple[tuple[str, float], ...]  # (name, memory GiB) per GPU from nvidia-smi
    cpu_count: int
    # model types the installed liger_kernel patches (rmspec.plan.liger); None: not installed
    liger_model_types: tuple[str, ...] | None = None


def detect_host() -> HostFacts:
    import os

    flags: tuple[str, ...] = ()
    try:
        text = Path("/proc/cpuinfo").read_text()
        line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
        flags = tuple(f for f in ("avx512_bf16", "amx_bf16") if f in line.split())
    except OSError:
        pass
    ram = None
    try:
        match = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        ram = int(match.group(1)) * 1024 / GIB if match else None
    except OSError:
        pass
    gpus: list[tuple[str, float]] = []
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=5,
                check=True,
            ).stdout
            for row in out.strip().splitlines():
                name, mib = (part.strip() for part in row.rsplit(",", 1))
                gpus.append((name, float(mib) / 1024))
        except (OSError, subprocess.SubprocessError, ValueError):
            gpus = []
    from rmspec.plan.liger import installed_model_types

    return HostFacts(flags, ram, tuple(gpus), os.cpu_count() or 1, installed_model_types())


@dataclass(frozen=True)
class HardwareProfile:
    """Devices the plan sizes: kind, count, memory per device, bf16, peak speed."""

    device: str  # catalog key, "custom", or "cpu"
    label: str
    is_gpu: bool
    memory_gb: float  # per device (host RAM per node for cpu, shared by its processes)
    bf16_native: bool
    peak_tflops: float
    gpus_per_node: int  # processes per node (CPU processes for device cpu)
    nodes: int
    cpu_memory_gb: float | None  # host RAM per node; None: unknown, assumed ample
    headroom: float
    interconnect: str
    source: str  # "spec (h100-80gb)", "detected: nvidia-smi", ...
    bf16_note: str = ""
    strategy: str = "auto"  # hardware.strategy: auto, or the one strategy the spec asks for

    @property
    def num_processes(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def usable_gb(self) -> float:
        """Memory a process may plan to use: capacity less headroom (CPU RAM split among its processes)."""
        per_process = self.memory_gb if self.is_gpu else self.memory_gb / self.gpus_per_node
        return per_process * (1 - self.headroom)

    @property
    def capacity_per_process_gb(self) -> float:
        return self.memory_gb if self.is_gpu else self.memory_gb / self.gpus_per_node

    def to_json(self) -> dict:
        return asdict(self)


def _gpu_key(name: str, mem_gib: float) -> str | None:
    """Map an nvidia-smi name to a catalog key (H100 80GB HBM3 -> h100-80gb)."""
    low = name.lower()
    for key in DEVICE_CATALOG:
        if key == "cpu":
            continue
        model, size = key.rsplit("-", 1)
        if model in low.replace(" ", "") and abs(float(size.rstrip("gb")) - mem_gib) < 0.15 * float(size.rstrip("gb")):
            return key
    return None


def hardware_profile(hw, host: HostFacts | None = None) -> HardwareProfile:
    """The profile for a spec's `hardware:` section; `host` is detected only when the spec needs it."""
    device = hw.device
    if device == "auto":
        host = host or detect_host()
        if host.gpus:
            name, mem = host.gpus[0]
            key = _gpu_key(name, mem)
            info = DEVICE_CATALOG[key] if key else None
            return HardwareProfile(
                device=key or "custom",
                label=name,
                is_gpu=True,
                memory_gb=hw.memory_gb or mem,
                bf16_native=hw.bf16 if hw.bf16 is not None else (info.bf16 if info else True),
                peak_tflops=info.peak_tflops_bf16 if info else 100.0,
                gpus_per_node=len(host.gpus) if hw.gpus_per_node == 1 else hw.gpus_per_node,
                nodes=hw.nodes,
                cpu_memory_gb=hw.cpu_memory_gb or host.ram_gb,
                headroom=hw.headroom,
                interconnect=hw.interconnect,
                source=f"detected: nvidia-smi ({len(host.gpus)} x {name})",
                strategy=hw.strategy,
            )
        if hw.nodes > 1:  # a login node without GPUs says nothing about the compute nodes
            raise PlanError(
                f"hardware.nodes is {hw.nodes} with hardware.device: auto, and auto detects the planning host: "
                "name the device (e.g. `hardware.device: h100-80gb`): this host has no GPU",
                hint="set hardware.device to the compute nodes' GPU (`rmspec plan SPEC --set "
                "hardware.device=h100-80gb`); a CPU job across nodes says hardware.device: cpu",
            )
        device = "cpu"
        source = "detected: no GPU (nvidia-smi absent), CPU with RAM from /proc/meminfo"
    else:
        source = f"spec (hardware.device: {device})"
    if device == "cpu":
        host_ram = hw.cpu_memory_gb or hw.memory_gb
        if host_ram is None:
            host = host or detect_host()
            host_ram = host.ram_gb or 8.0
            source += f"; host RAM {host_ram:.1f} GB from /proc/meminfo"
        detected = hw.device == "auto"
        flags = host.cpu_bf16_flags if host is not None else ()
        label = DEVICE_CATALOG["cpu"].label
        if hw.bf16 is not None:
            native = bool(hw.bf16)
            note = f"hardware.bf16: {str(hw.bf16).lower()} in the spec"
        elif detected and flags:
            native = True
            label = f"CPU with native bf16 ({', '.join(flags)})"
            note = (
                f"detected {', '.join(flags)} in /proc/cpuinfo; a bf16-autocast training step took 0.8 to 1.0x "
                "the fp32 time on such a CPU (a MiniLM step measured at 0.97x, its matmuls at 0.30x)"
            )
        elif detected:
            native = False
            note = "the CPU has no native bf16 (no avx512_bf16/amx_bf16 flag in /proc/cpuinfo)"
        else:
            native = False
            note = (
                "hardware.device: cpu assumes no native bf16; use device: auto to detect it from /proc/cpuinfo, "
                "or set hardware.bf16: true"
            )
        return HardwareProfile(
            device="cpu",
            label=label,
            is_gpu=False,
            memory_gb=float(host_ram),
            bf16_native=native,
            peak_tflops=DEVICE_CATALOG["cpu"].peak_tflops_bf16,
            gpus_per_node=hw.gpus_per_node,
            nodes=hw.nodes,
            cpu_memory_gb=float(host_ram),
            headroom=hw.headroom,
            interconnect=hw.interconnect,
            source=source,
            bf16_note=note,
            strategy=hw.strategy,
        )
    info = hw.resolved_device()
    return HardwareProfile(
        device=device,
        label=info.label,
        is_gpu=True,
        memory_gb=float(info.memory_gb),
        bf16_native=info.bf16,
        peak_tflops=info.peak_tflops_bf16,
        gpus_per_node=hw.gpus_per_node,
        nodes=hw.nodes,
        cpu_memory_gb=hw.cpu_memory_gb,
        headroom=hw.headroom,
        interconnect=hw.interconnect,
        source=source,
        strategy=hw.strategy,
    )
