"""Time spent moving gradients and parameters between GPUs: what `hardware.interconnect` changes.

Ring collectives over n devices (NCCL's bus-bandwidth model): an all-reduce moves 2(n-1)/n x the
buffer through every device's link, an all-gather or a reduce-scatter (n-1)/n x the buffer. Per
strategy (bytes per element: the compute dtype, 2 for bf16/fp16; fp32 gradients when the plan keeps
fp32 master weights):
- ddp, deepspeed_zero2: one all-reduce of the trained gradients per optimizer step (gradient
  accumulation syncs only on the last micro step; ZeRO-2's reduce-scatter + all-gather of the updated
  parameters moves the same bytes);
- fsdp_shard_grad_op: per micro step, an all-gather of the parameters (forward, kept for backward)
  and a reduce-scatter of the gradients;
- fsdp_full_shard(_offload), deepspeed_zero3(_offload): per micro step, the parameters gathered
  twice (forward and again in backward) and the gradients reduce-scattered (ZeRO-3's 1.5x of DDP).
- fsdp_hybrid_shard (HSDP): full shard's gathers and reduce-scatter within each node (n = gpus_per_node),
  then, per micro step, a ring all-reduce of each process's gradient shard across the nodes (r = nodes):
  2(r-1)/r x the trained gradient bytes / gpus_per_node.
The links: hardware.interconnect, one link for everything, unless hardware.interconnect_between_nodes names
the link between nodes (then interconnect is the link within a node). With two links, HSDP's node-local
traffic is timed at the node's link and its all-reduce across nodes at the link between them; a ring over
every process (ddp, flat FSDP, DeepSpeed) crosses nodes, so it runs at the slower of the two.
Context parallelism (hardware.context_parallel: N, rmspec.train.context_parallel) adds its own traffic,
inside each group of N consecutive ranks: every attention layer all-gathers the group's keys and values
(after RoPE, at the key/value heads: kv_dim = kv_heads x head_dim per token) in the forward, the
backward sends their gradients back (a reduce-scatter on NCCL), and gradient checkpointing's recompute
gathers them once more. Each of these passes moves (N-1)/N of the whole row's keys and values through
every rank's link (context_parallel_bytes):
    passes x layers x (N-1)/N x rows x 2 x width x kv_dim x bytes per element, per micro step,
passes 2 (forward, backward) or 3 with checkpointing, rows the micro batch's rows, width the row padded
to 2N chunks, times the gradient accumulation steps. The group's link is the node's when it fits on one
node (groups are consecutive ranks: rmspec.train.context_parallel_run.layout), else the link between nodes.
Nothing is assumed to overlap with compute, so the added time is an upper bound. Only GPU plans with
more than one process are modelled (CPU processes share one machine's memory): a CPU plan's
context-parallel section still states the bytes, its time estimate adds nothing.

BANDWIDTH is the one-direction bandwidth per device that a ring sees on each link type.
"""

from __future__ import annotations

from typing import Any

BANDWIDTH_GB_S: dict[str, float] = {
    # NVLink 4 on H100 SXM: 900 GB/s total per GPU, 450 GB/s each way (NVIDIA H100 datasheet)
    "nvlink": 450.0,
    # PCIe 4.0 x16: 32 GB/s raw each way (PCI-SIG), ~25 GB/s after protocol overhead
    "pcie": 25.0,
    # InfiniBand NDR: 400 Gb/s per port = 50 GB/s each way, one HCA per GPU (as in DGX H100)
    "infiniband": 50.0,
    # 100 Gigabit Ethernet: 12.5 GB/s each way
    "ethernet": 12.5,
}

PER_STEP = ("ddp", "deepspeed_zero2")
GATHER_ONCE = ("fsdp_shard_grad_op",)
GATHER_TWICE = ("fsdp_full_shard", "fsdp_full_shard_offload", "deepspeed_zero3", "deepspeed_zero3_offload")


def between_nodes_link(interconnect: str, between_nodes: str | None, nodes: int) -> str | None:
    """The link between nodes where the plan has two (hardware.interconnect_between_nodes on several nodes)."""
    return between_nodes if nodes > 1 and between_nodes not in (None, interconnect) else None


def communication(
    *,
    strategy: str,
    num_processes: int,
    is_gpu: bool,
    interconnect: str,
    num_parameters: int,
    trainable_parameters: int,
    precision: str,
    master_fp32: bool,
    gradient_accumulation_steps: int,
    nodes: int = 1,
    between_nodes: str | None = None,
) -> dict[str, Any] | None:
    """Bytes each device sends per optimizer step and their time on `interconnect` (and `between_nodes`, the
    link between nodes where it differs); None when nothing is modelled (one process, or CPU processes)."""
    n = num_processes // nodes if strategy == "fsdp_hybrid_shard" else num_processes
    if num_processes <= 1 or not is_gpu or strategy == "single":
        return None
    ring = (n - 1) / n
    low = precision in ("bf16", "fp16")
    comm_bytes = 2 if low else 4  # what FSDP/ZeRO gather and reduce: the compute dtype
    grad_bytes = 4 if (master_fp32 or not low) else 2  # DDP reduces the parameters' own gradients
    if strategy in PER_STEP:
        moved = 2 * ring * trainable_parameters * grad_bytes
        pattern = "ring all-reduce of the gradients once per optimizer step: 2(n-1)/n x gradient bytes"
    elif strategy in GATHER_ONCE or strategy in GATHER_TWICE:
        gathers = 1 if strategy in GATHER_ONCE else 2
        per_micro = ring * (gathers * num_parameters + trainable_parameters) * comm_bytes
        moved = per_micro * gradient_accumulation_steps
        pattern = (
            f"per micro step: {'one all-gather' if gathers == 1 else 'two all-gathers (forward, backward)'} "
            "of the parameters + a reduce-scatter of the gradients, each (n-1)/n x their bytes"
        )
    elif strategy == "fsdp_hybrid_shard":
        across = 2 * (nodes - 1) / nodes * trainable_parameters / n * comm_bytes * gradient_accumulation_steps
        moved = ring * (2 * num_parameters + trainable_parameters) * comm_bytes * gradient_accumulation_steps + across
        pattern = (
            "per micro step, within each node (n = gpus_per_node): two all-gathers of the parameters + a "
            "reduce-scatter of the gradients, each (n-1)/n x their bytes; across nodes (r = nodes): an all-reduce "
            "of each process's gradient shard, 2(r-1)/r x its bytes"
        )
    else:
        return None
    inside, between = BANDWIDTH_GB_S[interconnect], between_nodes_link(interconnect, between_nodes, nodes)
    if between is None:
        link, seconds = interconnect, moved / (inside * 1e9)
    else:
        outside = BANDWIDTH_GB_S[between]
        link = f"{interconnect} within nodes, {between} between them"
        if strategy == "fsdp_hybrid_shard":  # the gathers on the node's link, the all-reduce between nodes
            seconds = (moved - across) / (inside * 1e9) + across / (outside * 1e9)
        else:  # one ring over every process: as fast as its slowest link
            seconds = moved / (min(inside, outside) * 1e9)
    return {
        "interconnect": link,
        # one link: its rate; two: the effective rate over the links used
        "bandwidth_gb_per_s": inside if between is None else round(moved / seconds / 1e9, 1),
        "pattern": pattern,
        "bytes_per_step": round(moved),
        "seconds_per_step": round(seconds, 4),
    }


def context_parallel_bytes(
    *,
    degree: int,
    num_layers: int,
    kv_dim: int,
    rows_per_micro_step: int,
    width: int,
    bytes_per_element: int,
    checkpointing: bool,
    gradient_accumulation_steps: int,
) -> float:
    """Bytes each rank of a context-parallel group sends (and receives) per optimizer step for its keys and
    values: the forward all-gather, the backward's reduce-scatter of their gradients and, with gradient
    checkpointing, the recompute's all-gather, each (N-1)/N of every layer's keys and values of the whole
    row (``width`` tokens, padded to 2N chunks), per micro step."""
    if degree <= 1:
        return 0.0
    passes = 3 if checkpointing else 2
    per_pass = num_layers * (degree - 1) / degree * rows_per_micro_step * 2 * width * kv_dim * bytes_per_element
    return passes * per_pass * gradient_accumulation_steps


def context_parallel_communication(
    *,
    moved_bytes: float,
    degree: int,
    gpus_per_node: int,
    nodes: int,
    is_gpu: bool,
    interconnect: str,
    checkpointing: bool,
    row_tokens: int,
    between_nodes: str | None = None,
) -> dict[str, Any] | None:
    """The time of ``moved_bytes`` (context_parallel_bytes, for rows of ``row_tokens`` padded) per step on
    the group's link (``between_nodes`` where a group spans nodes and the plan names that link); None when
    nothing is modelled (no split, or CPU processes, as for communication)."""
    if degree <= 1 or not is_gpu:
        return None
    within = gpus_per_node % degree == 0  # consecutive ranks: every group on one node
    between = between_nodes_link(interconnect, between_nodes, nodes)
    if within:
        one_link = nodes > 1 and between is None
        link = (
            "within one node (timed at hardware.interconnect, the plan's one link)" if one_link else "within one node"
        )
    else:
        link = "across nodes (a group spans nodes)"
        interconnect = between or interconnect
    bandwidth = BANDWIDTH_GB_S[interconnect]
    passes = "forward, recompute (checkpointing) and backward" if checkpointing else "forward and backward"
    return {
        "interconnect": interconnect,
        "bandwidth_gb_per_s": bandwidth,
        "link": link,
        "within_node": within,
        "row_tokens": row_tokens,
        "pattern": f"keys and values of every layer, {passes}, each (N-1)/N of the row's, per micro step",
        "bytes_per_step": round(moved_bytes),
        "seconds_per_step": round(moved_bytes / (bandwidth * 1e9), 4),
    }


def with_communication(
    estimate: dict[str, Any], comm: dict[str, Any] | None, context_parallel: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The time estimate with the communication time added to each step: the strategy's gradient and
    parameter traffic (``comm``) and the context-parallel groups' key/value traffic (``context_parallel``);
    unchanged when both are None."""
    added = [c for c in (comm, context_parallel) if c is not None]
    if not added:
        return estimate
    out = dict(estimate)
    compute = out["seconds_per_step"]
    out["compute_seconds_per_step"] = compute
    out["seconds_per_step"] = round(compute + sum(c["seconds_per_step"] for c in added), 4)
    if comm is not None:
        out["communication"] = comm
    if context_parallel is not None:
        out["context_parallel_communication"] = context_parallel
    if out.get("steps_per_epoch"):
        out["seconds_per_epoch"] = round(out["steps_per_epoch"] * out["seconds_per_step"], 1)
    link = added[0]
    out["note"] = out["note"].replace(
        "compute only (communication not modelled)",
        f"compute + communication over {link['interconnect']} ({link['bandwidth_gb_per_s']:g} GB/s, "
        "no overlap assumed)",
    )
    return out
