"""`hardware:` what the job runs on. The device catalog is a closed list the planner relies on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section
from rmspec.spec.choices import unknown_choice


@dataclass(frozen=True)
class DeviceInfo:
    memory_gb: float  # usable memory per device, in GiB as vendors state it (GB ~ GiB here)
    bf16: bool  # native bf16 matmul support
    peak_tflops_bf16: float  # dense, for time estimates (fp32 figure for cpu)
    label: str


DEVICE_CATALOG: dict[str, DeviceInfo] = {
    # cpu: per 2 cores, fp32, calibrated (not a vendor peak): the quickstart (MiniLM, 10.65M non-embedding
    # parameters, 180 steps of 16 pairs) took 182 s on this project's idle 2-core machine (Intel Xeon, load < 1),
    # ~2,650 real tokens per step + 10% padding = ~2,944 token slots; at 6 FLOPs per parameter per token plus
    # attention (12 x layers x hidden x 92 tokens) that is 1.96e11 FLOPs per step in 1.01 s = 0.193 TFLOPS
    # achieved. 0.39 x MFU_CPU 0.5 = 0.195 reproduces it; the split between peak and MFU is nominal. The planner
    # scales it by the core count it sees (rmspec/plan/estimate.py CPU_CATALOG_CORES), assuming linear scaling.
    "cpu": DeviceInfo(0.0, False, 0.39, "CPU (fp32; no native bf16 assumed)"),
    "t4-16gb": DeviceInfo(16, False, 65, "NVIDIA T4 16GB"),
    "v100-16gb": DeviceInfo(16, False, 125, "NVIDIA V100 16GB"),
    "v100-32gb": DeviceInfo(32, False, 125, "NVIDIA V100 32GB"),
    "a10g-24gb": DeviceInfo(24, True, 70, "NVIDIA A10G 24GB"),
    "l4-24gb": DeviceInfo(24, True, 121, "NVIDIA L4 24GB"),
    "rtx3090-24gb": DeviceInfo(24, True, 71, "NVIDIA RTX 3090 24GB"),
    "rtx4090-24gb": DeviceInfo(24, True, 165, "NVIDIA RTX 4090 24GB"),
    "l40s-48gb": DeviceInfo(48, True, 362, "NVIDIA L40S 48GB"),
    "a6000-48gb": DeviceInfo(48, True, 155, "NVIDIA RTX A6000 48GB"),
    "a100-40gb": DeviceInfo(40, True, 312, "NVIDIA A100 40GB"),
    "a100-80gb": DeviceInfo(80, True, 312, "NVIDIA A100 80GB"),
    "h100-80gb": DeviceInfo(80, True, 989, "NVIDIA H100 80GB"),
    "h200-141gb": DeviceInfo(141, True, 989, "NVIDIA H200 141GB"),
    "b200-192gb": DeviceInfo(192, True, 2250, "NVIDIA B200 192GB"),
    "mi300x-192gb": DeviceInfo(192, True, 1307, "AMD MI300X 192GB"),
}


# sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds (man sbatch); 0 asks for no limit.
SBATCH_TIME = re.compile(r"\d+|\d+:[0-5]?\d|\d+:[0-5]?\d:[0-5]?\d|\d+-\d+|\d+-\d+:[0-5]?\d|\d+-\d+:[0-5]?\d:[0-5]?\d")
# One word on an #SBATCH line: no whitespace or control character can end the line and start a shell command.
SBATCH_WORD = re.compile(r"[^\s\x00-\x1f\x7f]+")
# The #SBATCH options the script writes itself (or a slurm field writes): `extra` may not repeat them.
SBATCH_WRITTEN = {
    "--job-name": "the spec's name",
    "--nodes": "hardware.nodes",
    "--ntasks-per-node": "one task per node, always",
    "--gpus-per-node": "hardware.slurm.gpus_per_node",
    "--exclusive": "always written",
    "--requeue": "always written",
    "--open-mode": "always written (append)",
    "--output": "the run directory",
    "--partition": "hardware.slurm.partition",
    "--account": "hardware.slurm.account",
    "--time": "hardware.slurm.time",
    "--qos": "hardware.slurm.qos",
    "--constraint": "hardware.slurm.constraint",
}
SBATCH_SHORT = {"-J": "--job-name", "-N": "--nodes", "-p": "--partition", "-A": "--account", "-t": "--time"}
SBATCH_SHORT |= {"-q": "--qos", "-C": "--constraint", "-o": "--output"}


class SlurmSpec(Section):
    """`hardware.slurm:` what a real cluster asks of a job, written as #SBATCH lines of launch.slurm."""

    partition: str | None = Field(None, description="#SBATCH --partition (sbatch's SBATCH_PARTITION also works).")
    account: str | None = Field(None, description="#SBATCH --account to charge (or SBATCH_ACCOUNT).")
    time: NonNegativeInt | str | None = Field(
        None,
        description="#SBATCH --time, as sbatch reads it: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
        '(quote it in YAML: "00:30:00"); or SBATCH_TIMELIMIT.',
    )
    qos: str | None = Field(None, description="#SBATCH --qos (or SBATCH_QOS).")
    constraint: str | None = Field(
        None, description="#SBATCH --constraint, node features such as a100&ib (or SBATCH_CONSTRAINT)."
    )
    gpus_per_node: str | None = Field(
        None,
        description="#SBATCH --gpus-per-node when it must differ from hardware.gpus_per_node, e.g. a typed "
        "request a100:8; its count must be at least hardware.gpus_per_node (GPU plans only).",
    )
    extra: list[str] = Field(
        default_factory=list,
        description="Further sbatch options, one per entry, each written as `#SBATCH <entry>` (e.g. --mem=0, "
        "--mail-type=END); an option rmspec writes itself is refused here.",
    )

    @field_validator("partition", "account", "qos", "constraint", "gpus_per_node")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        if value is not None and not SBATCH_WORD.fullmatch(value):
            raise ValueError(f"{value!r} must be one word: no space, tab, newline or control character")
        return value

    @field_validator("time")
    @classmethod
    def _sbatch_time(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str) and not SBATCH_TIME.fullmatch(value):
            raise ValueError(
                f'{value!r} is not a time sbatch reads: give minutes (30), MM:SS, HH:MM:SS ("02:00:00"), '
                'D-HH, D-HH:MM or D-HH:MM:SS ("1-12:00:00")'
            )
        return value

    @field_validator("gpus_per_node")
    @classmethod
    def _gpu_request(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"([A-Za-z0-9_.-]+:)?[1-9]\d*", value):
            raise ValueError(f"{value!r} is not a GPU request: give a count (8) or type:count (a100:8)")
        return value

    @field_validator("extra")
    @classmethod
    def _extra_lines(cls, lines: list[str]) -> list[str]:
        for line in lines:
            if not re.fullmatch(r"--?[A-Za-z][^\x00-\x1f\x7f]*", line) or line != line.strip():
                raise ValueError(
                    f"{line!r}: each entry is one sbatch option on one line, starting with - (e.g. --mem=0)"
                )
            option = re.split(r"[=\s]", line, maxsplit=1)[0]
            option = SBATCH_SHORT.get(option, option)
            if option in SBATCH_WRITTEN:
                raise ValueError(f"{line!r}: {option} is written by rmspec ({SBATCH_WRITTEN[option]}), not here")
        return lines

    def gpu_count(self) -> int | None:
        return None if self.gpus_per_node is None else int(self.gpus_per_node.rsplit(":", 1)[-1])


class HardwareSpec(Section):
    device: str = Field(
        "auto",
        description="auto (detect this machine), cpu, a GPU from the catalog (e.g. h100-80gb, a100-40gb, l4-24gb), or custom with memory_gb.",
    )
    memory_gb: PositiveFloat | None = Field(
        None,
        description="Memory per device in GB; required for device: custom, overrides the catalog otherwise. "
        "On device cpu: the host RAM per node, as cpu_memory_gb (give one of the two).",
    )
    bf16: bool | None = Field(
        None, description="Whether the device computes bf16 natively; required for device: custom."
    )
    gpus_per_node: PositiveInt = Field(1, description="GPUs per node. With device cpu: the number of CPU processes.")
    nodes: PositiveInt = Field(1, description="Number of machines; more than one emits a SLURM script.")
    cpu_memory_gb: PositiveFloat | None = Field(
        None,
        description="Host RAM per node in GB (bounds CPU offload). Unset: detected for auto, assumed ample otherwise.",
    )
    interconnect: Literal["nvlink", "pcie", "infiniband", "ethernet"] = Field(
        "nvlink",
        description="Link between GPUs; informs the time estimate (gradient and parameter traffic of multi-GPU "
        "plans, and context parallelism's key and value traffic, at nvlink 450, pcie 25, infiniband 50, ethernet "
        "12.5 GB/s each way), not the strategy. With interconnect_between_nodes, the link within a node.",
    )
    interconnect_between_nodes: Literal["nvlink", "pcie", "infiniband", "ethernet"] | None = Field(
        None,
        description="Several nodes: the link between them (one per GPU), where it differs from interconnect "
        "(then the link within a node). The time estimate runs fsdp_hybrid_shard's gathers and a context-parallel "
        "group within a node at interconnect, and traffic between nodes at this: HSDP's all-reduce, a group that "
        "spans nodes, and a ring over every process (ddp, flat FSDP, DeepSpeed) at the slower of the two. Unset: "
        "interconnect for all.",
    )
    headroom: float = Field(
        0.1, ge=0, lt=0.9, description="Fraction of device memory kept free for fragmentation and kernels."
    )
    strategy: Literal[
        "auto",
        "single",
        "ddp",
        "fsdp_shard_grad_op",
        "fsdp_full_shard",
        "fsdp_full_shard_offload",
        "fsdp_hybrid_shard",
        "deepspeed_zero2",
        "deepspeed_zero3",
        "deepspeed_zero3_offload",
    ] = Field(
        "auto",
        description="Distributed strategy; auto lets the plan pick the cheapest that fits (DeepSpeed and "
        "fsdp_hybrid_shard only when named here). fsdp_hybrid_shard is HSDP: FSDP2 on a 2-D mesh (nodes x "
        "gpus_per_node) that shards parameters, gradients and optimizer states within each node and replicates "
        "them across nodes, so the parameters' gathers stay on the node's links and only the gradient shards "
        "cross between nodes (needs nodes and gpus_per_node above 1; with hardware.context_parallel the groups "
        "lie within the shard dimension).",
    )

    context_parallel: PositiveInt | Literal["auto"] = Field(
        "auto",
        description="Split each packed row (prompt, then chosen and rejected; a prompt and a ranked list; a pointwise "
        "or process example; a judge's prompt and verdict) across this "
        "many processes: each holds two chunks of it, gathers the keys and values, and attends under rmspec's "
        "own mask, exactly (docs/long_context.md). auto: 1 where a whole row fits one device, else the plan picks "
        "the smallest divisor of the processes whose share of a row fits, and says why with the figures (or "
        "refuses with them). A number must divide the number of processes (gpus_per_node x nodes); above 1 it "
        "needs a decoder, packing (training.packing auto or shared_prefix) and model.attn_implementation auto, sdpa "
        "or eager. `rmspec plan` sizes "
        "it per rank (gradient accumulation x N keeps global_batch_size); `rmspec run` trains Bradley-Terry (its "
        "ties, ODIN, ensembles and SFT term too), listwise, pointwise, process and generative judges (method sft) "
        "under DDP or FSDP (shard_grad_op, full_shard, its CPU offload, hybrid_shard), with or without gradient "
        "checkpointing or LoRA, and refuses, with the reason, what is only planned (a judge trained by GRPO, "
        "DeepSpeed).",
    )
    slurm: SlurmSpec | None = Field(
        None,
        description="Several nodes: the partition, account, time limit, QoS, constraint, GPU request and further "
        "#SBATCH lines of launch.slurm (docs/several_nodes.md).",
    )

    @field_validator("device")
    @classmethod
    def _known_device(cls, device: str) -> str:
        valid = ["auto", "custom", *DEVICE_CATALOG]
        if device not in valid:
            raise ValueError(unknown_choice("device", device, valid))
        return device

    @model_validator(mode="after")
    def _custom_needs_numbers(self) -> HardwareSpec:
        if self.device == "custom" and (self.memory_gb is None or self.bf16 is None):
            raise ValueError("device: custom needs memory_gb and bf16 (whether the GPU computes bf16 natively)")
        return self

    @model_validator(mode="after")
    def _slurm_for_several_nodes(self) -> HardwareSpec:
        if self.slurm is None:
            return self
        if self.nodes == 1:
            raise ValueError(
                "hardware.slurm writes launch.slurm, which only a plan on several nodes has: set hardware.nodes "
                "above 1, or delete hardware.slurm"
            )
        count = self.slurm.gpu_count()
        if count is not None and self.device == "cpu":
            raise ValueError("hardware.slurm.gpus_per_node asks for GPUs, but hardware.device is cpu: delete it")
        if count is not None and count < self.gpus_per_node:
            raise ValueError(
                f"hardware.slurm.gpus_per_node {self.slurm.gpus_per_node} asks for fewer GPUs than the "
                f"{self.gpus_per_node} processes per node the plan starts (hardware.gpus_per_node)"
            )
        return self

    @model_validator(mode="after")
    def _hybrid_shard_needs_both_dimensions(self) -> HardwareSpec:
        if self.strategy == "fsdp_hybrid_shard" and self.nodes == 1:
            raise ValueError(
                "strategy fsdp_hybrid_shard replicates across nodes and shards within each, but hardware.nodes is 1: "
                "on one node it is fsdp_full_shard, so set strategy: fsdp_full_shard, or hardware.nodes above 1"
            )
        if self.strategy == "fsdp_hybrid_shard" and self.gpus_per_node == 1:
            raise ValueError(
                "strategy fsdp_hybrid_shard shards within each node, but hardware.gpus_per_node is 1: with one process "
                "a node there is nothing to shard, so set strategy: fsdp_full_shard (shards over every node) or ddp"
            )
        return self

    @model_validator(mode="after")
    def _between_nodes_needs_nodes(self) -> HardwareSpec:
        if self.interconnect_between_nodes is not None and self.nodes == 1:
            raise ValueError(
                "interconnect_between_nodes is the link between nodes, and nodes is 1: remove it, or set nodes "
                "above 1 (interconnect is the link within a node)"
            )
        return self

    @model_validator(mode="after")
    def _context_parallel_divides(self) -> HardwareSpec:
        processes = self.gpus_per_node * self.nodes
        if self.context_parallel != "auto" and processes % self.context_parallel:
            raise ValueError(
                f"context_parallel {self.context_parallel} does not divide the {processes} processes "
                f"(gpus_per_node {self.gpus_per_node} x nodes {self.nodes}): each sequence is split over a group of "
                f"context_parallel processes, so give a divisor of {processes}, or more processes"
            )
        return self

    def resolved_device(self) -> DeviceInfo | None:
        """Catalog facts with the spec's overrides; None for device: auto (the planner detects)."""
        if self.device == "auto":
            return None
        if self.device == "custom":
            assert self.memory_gb is not None  # _custom_needs_numbers refuses custom without it
            return DeviceInfo(self.memory_gb, bool(self.bf16), 100.0, f"custom {self.memory_gb} GB")
        info = DEVICE_CATALOG[self.device]
        if self.memory_gb is not None or self.bf16 is not None:
            info = DeviceInfo(
                self.memory_gb if self.memory_gb is not None else info.memory_gb,
                self.bf16 if self.bf16 is not None else info.bf16,
                info.peak_tflops_bf16,
                info.label,
            )
        return info
