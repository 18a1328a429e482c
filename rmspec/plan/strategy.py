"""Choose precision, strategy, checkpointing and batch split: the cheapest thing that fits.

Strategies are tried in order of cost (communication and complexity): one device, DDP,
FSDP shard-grad-op, FSDP full shard, full shard with activation checkpointing, full shard
with CPU offload. The first whose micro batch of 1 fits in the device memory less headroom
wins; then the largest power-of-two micro batch that fits and divides the per-process batch.
Each refused rung keeps the reason, and when nothing fits the error names what would.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from rmspec.errors import PlanError
from rmspec.plan.hardware import HardwareProfile
from rmspec.plan.memory import GIB, MemoryEstimate, TrainingShape, estimate
from rmspec.plan.model_shape import ModelShape


@dataclass(frozen=True)
class Precision:
    compute: str  # bf16 | fp16 | fp32
    master_fp32: bool
    mixed_precision: str  # accelerate's mixed_precision: bf16 | fp16 | no
    reason: str


def choose_precision(model_dtype: str, hw: HardwareProfile, lora: bool) -> Precision:
    """Per device: bf16 where it is native, fp16 on older GPUs, fp32 on CPUs; the spec's dtype wins."""
    if model_dtype == "float32":
        return Precision("fp32", True, "no", "model.dtype: float32 in the spec")
    if model_dtype == "bfloat16":
        slow = "" if hw.bf16_native else f" ({hw.label} has no native bf16: expect it to be slow)"
        return Precision(
            "bf16",
            False,
            "bf16",
            "model.dtype: bfloat16 in the spec: weights, gradients and "
            "optimizer states in bf16 (8 bytes per parameter)" + slow,
        )
    if model_dtype == "float16":
        return Precision("fp16", False, "fp16", "model.dtype: float16 in the spec")
    # auto
    if hw.bf16_native:
        base = "frozen base in bf16, adapters in fp32" if lora else "fp32 master weights, bf16 autocast"
        why = f"; {hw.bf16_note}" if hw.bf16_note else ""
        return Precision("bf16", True, "bf16", f"{hw.label} computes bf16 natively: mixed precision ({base}){why}")
    if hw.is_gpu:
        return Precision("fp16", True, "fp16", f"{hw.label} has no native bf16: fp16 mixed precision with loss scaling")
    return Precision("fp32", True, "no", f"fp32 on CPU: {hw.bf16_note}")


@dataclass(frozen=True)
class Rung:
    strategy: str
    checkpointing: bool

    @property
    def label(self) -> str:
        return self.strategy + (" + checkpointing" if self.checkpointing else "")


@dataclass
class Choice:
    rung: Rung
    micro_batch: int
    grad_accum: int
    memory: MemoryEstimate
    refused: list[tuple[str, str]] = field(default_factory=list)  # (rung label, why)
    micro_reason: str = ""


def ladder(hw: HardwareProfile, checkpointing: str) -> list[Rung]:
    """The rungs to try, cheapest first, given the device and the spec's checkpointing setting."""
    n = hw.num_processes
    if hw.strategy != "auto":
        names = [(forced_strategy(hw), False), (forced_strategy(hw), True)]
    elif not hw.is_gpu:
        # accelerate's FSDP path does not shard on CPU; CPU processes run plain DDP over gloo.
        names = [("single" if n == 1 else "ddp", False), ("single" if n == 1 else "ddp", True)]
    elif n == 1:
        names = [("single", False), ("single", True), ("fsdp_full_shard_offload", True)]
    else:
        names = [
            ("ddp", False),
            ("fsdp_shard_grad_op", False),
            ("fsdp_full_shard", False),
            ("fsdp_full_shard", True),
            ("fsdp_full_shard_offload", True),
        ]
    rungs: list[Rung] = []
    for name, ckpt in names:
        if checkpointing == "on":
            ckpt = True
        elif checkpointing == "off":
            ckpt = False
        rung = Rung(name, ckpt)
        if rung not in rungs:
            rungs.append(rung)
    return rungs


def forced_strategy(hw: HardwareProfile) -> str:
    """The strategy the spec names (hardware.strategy), refused where it cannot run."""
    name, n = hw.strategy, hw.num_processes
    if name == "single" and n > 1:
        raise PlanError(
            f"hardware.strategy: single uses one device, but the hardware has {n} processes",
            hint="set hardware.gpus_per_node: 1 and nodes: 1, or strategy: auto",
        )
    if name != "single" and n == 1 and not name.endswith("offload"):
        raise PlanError(
            f"hardware.strategy: {name} needs more than one process (the hardware has 1)",
            hint="use strategy: single (or an offload strategy), or more devices",
        )
    if not hw.is_gpu and name not in ("single", "ddp"):
        raise PlanError(
            f"hardware.strategy: {name} does not run on CPU processes (accelerate shards on GPUs only)",
            hint="use strategy: auto (single or ddp on CPU)",
        )
    return name


def micro_candidates(per_process: int, fixed: int | None) -> list[int]:
    """Powers of two that divide the per-process batch, largest first (or the spec's fixed value)."""
    if fixed is not None:
        return [fixed]
    out, m = [], 1
    while m <= per_process:
        if per_process % m == 0:
            out.append(m)
        m *= 2
    return sorted(out, reverse=True)


def _fits(mem: MemoryEstimate, hw: HardwareProfile) -> tuple[bool, str]:
    usable = hw.usable_gb * GIB
    if mem.total > usable:
        return False, (
            f"needs {mem.total / GIB:.1f} GB per device, {hw.usable_gb:.1f} GB usable "
            f"({hw.capacity_per_process_gb:.1f} GB less {hw.headroom:.0%} headroom)"
        )
    if mem.cpu_per_node and hw.cpu_memory_gb is not None:
        cpu_usable = hw.cpu_memory_gb * (1 - hw.headroom)
        if mem.cpu_per_node / GIB > cpu_usable:
            return False, (
                f"offload needs {mem.cpu_per_node / GIB:.0f} GB host RAM per node, "
                f"{cpu_usable:.0f} GB usable (hardware.cpu_memory_gb {hw.cpu_memory_gb:g} "
                f"less {hw.headroom:.0%} headroom)"
            )
    return True, ""


def host_memory(mem: MemoryEstimate, hw: HardwareProfile) -> tuple[float | None, list[str]]:
    """Host RAM usable per node for offload (None: unknown) and the warnings a plan carries about it.

    An offload plan lives in host RAM; with hardware.cpu_memory_gb unset for a named device that
    need cannot be checked, and the plan says so instead of assuming the RAM is there."""
    usable = None if hw.cpu_memory_gb is None else hw.cpu_memory_gb * (1 - hw.headroom)
    if not mem.cpu_per_node or usable is not None:
        return usable, []
    need = mem.cpu_per_node / GIB
    return usable, [
        f"host RAM unchecked: this plan offloads to CPU and needs {need:.1f} GB of host RAM per node, "
        f"but hardware.cpu_memory_gb is not set for {hw.label}; set it (RAM per node in GB) and the "
        "plan checks it, refusing to fit where it is too small"
    ]


def evaluate(
    shape: ModelShape,
    base: TrainingShape,
    rung: Rung,
    hw: HardwareProfile,
    micro: int,
    global_batch: int,
    replicas: int | None = None,
) -> MemoryEstimate:
    """The estimate at ``micro``; ``replicas``: what the global batch is dealt to (the processes, unless the
    context-parallel groups are given)."""
    per_replica = global_batch // (replicas or hw.num_processes)
    t = replace(base, micro_batch=micro, checkpointing=rung.checkpointing, grad_accum=per_replica // micro)
    return estimate(
        shape,
        t,
        rung.strategy,
        num_processes=hw.num_processes,
        gpus_per_node=hw.gpus_per_node,
        nodes=hw.nodes,
        is_gpu=hw.is_gpu,
    )


def replica_name(hw: HardwareProfile, replicas: int | None, plural: bool = False) -> str:
    """What the global batch is dealt to, as messages name it: processes, or context-parallel groups."""
    if replicas is None or replicas == hw.num_processes:
        return "processes" if plural else "process"
    return f"context-parallel group{'s' if plural else ''} (of {hw.num_processes // replicas} processes)"


def check_batch(global_batch: int, hw: HardwareProfile, fixed: int | None, replicas: int | None = None) -> None:
    """PlanError where the global batch does not split evenly over the replicas (the processes, or the
    context-parallel groups, whose ranks share their rows), or the micro batch does not divide each one's."""
    n = replicas or hw.num_processes
    if global_batch % n:
        lower, upper = (global_batch // n) * n, (global_batch // n + 1) * n
        options = " or ".join(str(v) for v in (lower, upper) if v > 0)
        raise PlanError(
            f"training.global_batch_size: {global_batch} does not split over {n} {replica_name(hw, replicas, True)}",
            hint=f"use a multiple of {n}, e.g. {options}",
        )
    per_replica = global_batch // n
    if fixed is not None and per_replica % fixed:
        raise PlanError(
            f"training.micro_batch_size: {fixed} does not divide the {per_replica} examples per "
            f"{replica_name(hw, replicas)} (global batch {global_batch} over {n} {replica_name(hw, replicas, True)})",
            hint="use micro_batch_size: auto or a divisor of " + str(per_replica),
        )


# What a device holds beyond the estimate at (memory, micro batch, checkpointing): a context-parallel rank's
# gathered keys and values and mask slice (rmspec.plan.context_parallel.rank_share); None: nothing.
Held = Callable[[MemoryEstimate, int, bool], MemoryEstimate]


def choose(
    shape: ModelShape,
    base: TrainingShape,
    hw: HardwareProfile,
    *,
    global_batch: int,
    checkpointing: str,
    fixed_micro: int | None,
    held: Held | None = None,
    replicas: int | None = None,
) -> Choice | None:
    """The first rung that fits with its largest micro batch; None when nothing fits. Fit is judged on what
    the device holds (``held`` of the estimate); the Choice keeps the estimate itself. ``replicas``: the
    context-parallel groups where rows are split (each group's ranks take the same micro batch together), else
    the processes."""
    check_batch(global_batch, hw, fixed_micro, replicas)
    per_replica = global_batch // (replicas or hw.num_processes)
    micros = micro_candidates(per_replica, fixed_micro)
    smallest = micros[-1]
    refused: list[tuple[str, str]] = []

    def device(rung: Rung, micro: int) -> MemoryEstimate:
        mem = evaluate(shape, base, rung, hw, micro, global_batch, replicas)
        return mem if held is None else held(mem, micro, rung.checkpointing)

    for rung in ladder(hw, checkpointing):
        ok, why = _fits(device(rung, smallest), hw)
        if not ok:
            refused.append((rung.label, f"micro batch {smallest}: {why}"))
            continue
        for micro in micros:
            if _fits(device(rung, micro), hw)[0]:
                mem = evaluate(shape, base, rung, hw, micro, global_batch, replicas)
                larger = [m for m in micros if m > micro]
                reason = (
                    f"largest power of two dividing {per_replica} examples per {replica_name(hw, replicas)}"
                    if not larger
                    else f"micro batch {larger[-1]} would need {device(rung, larger[-1]).total / GIB:.1f} GB"
                )
                if fixed_micro is not None:
                    reason = "training.micro_batch_size in the spec"
                return Choice(rung, micro, per_replica // micro, mem, refused, reason)
    return None


# ---------------------------------------------------------------- when nothing fits


def _fits_somehow(shape: ModelShape, base: TrainingShape, hw: HardwareProfile, checkpointing: str) -> Choice | None:
    """Any rung at micro batch 1 (the batch split is then a matter of accumulation)."""
    return choose(shape, base, hw, global_batch=hw.num_processes, checkpointing=checkpointing, fixed_micro=1)


def _sizes(found: Choice) -> str:
    """Device memory of a computed alternative, and the host RAM it needs when it offloads."""
    host = f", host {found.memory.cpu_per_node / GIB:.0f} GB per node" if found.memory.cpu_per_node else ""
    return f"{found.memory.total / GIB:.1f} GB per device{host}"


def what_would_fit(
    shape: ModelShape,
    base: TrainingShape,
    hw: HardwareProfile,
    *,
    checkpointing: str,
    has_lora: bool,
    seq_len_for: Callable[[int], int] | None = None,
) -> list[str]:
    """Computed alternatives: each one has been planned and fits.

    seq_len_for(max_length): the sequence the shape computes at that training.max_length (a packed
    row is longer than max_length); default: max_length itself.
    """
    from rmspec.spec.hardware import DEVICE_CATALOG

    out: list[str] = []
    if hw.is_gpu:
        for nodes in range(1, 129):
            for per_node in (1, 2, 4, 8) if nodes == 1 else (hw.gpus_per_node if hw.gpus_per_node > 1 else 8,):
                more = replace(hw, gpus_per_node=per_node, nodes=nodes)
                if more.num_processes <= hw.num_processes:
                    continue
                found = _fits_somehow(shape, base, more, checkpointing)
                if found:
                    out.append(
                        f"more GPUs: {nodes} node(s) x {per_node} {hw.label} "
                        f"({found.rung.label}, {_sizes(found)}); "
                        f"set hardware.gpus_per_node / hardware.nodes"
                    )
                    break
            else:
                continue
            break
    if not has_lora:
        lora = replace(base, lora_rank=16, lora_targets=None, master_fp32=True)
        found = _fits_somehow(shape, lora, hw, checkpointing)
        if found:
            out.append(f"LoRA: add model.lora: {{r: 16}} ({found.rung.label}, {_sizes(found)})")
    seq_len_for = seq_len_for or (lambda length: length)
    lengths = [s for s in (8192, 4096, 2048, 1024, 512, 256, 128) if seq_len_for(s) < base.seq_len]
    for length in lengths:
        found = _fits_somehow(shape, replace(base, seq_len=seq_len_for(length)), hw, checkpointing)
        if found:
            out.append(f"shorter sequences: training.max_length: {length} ({found.rung.label}, {_sizes(found)})")
            break
    if checkpointing == "off":
        found = _fits_somehow(shape, base, hw, "auto")
        if found:
            out.append(f"activation checkpointing: training.gradient_checkpointing: auto ({found.rung.label})")
    if hw.is_gpu and hw.cpu_memory_gb is not None:
        no_limit = replace(hw, cpu_memory_gb=None)
        found = _fits_somehow(shape, base, no_limit, checkpointing)
        if found and found.memory.cpu_per_node:
            # Rounded up: the RAM named here must fit when planned again (575.3 printed as 575 did not).
            out.append(
                f"CPU offload with {math.ceil(found.memory.cpu_per_node / GIB / (1 - hw.headroom))} GB host RAM "
                f"per node (hardware.cpu_memory_gb is {hw.cpu_memory_gb:g})"
            )
    if hw.is_gpu:
        bigger = sorted(
            (
                (info.memory_gb, key)
                for key, info in DEVICE_CATALOG.items()
                if key != "cpu" and info.memory_gb > hw.memory_gb and info.bf16 >= hw.bf16_native
            )
        )
        for mem, key in bigger:
            info = DEVICE_CATALOG[key]
            larger = replace(hw, device=key, label=info.label, memory_gb=float(mem), bf16_native=info.bf16)
            found = _fits_somehow(shape, base, larger, checkpointing)
            if found:
                out.append(
                    f"a larger device: hardware.device: {key} ({found.rung.label}, "
                    f"{found.memory.total / GIB:.1f} GB of {mem:g} GB)"
                )
                break
    return out
