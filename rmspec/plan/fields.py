"""The plan's reported fields (strategy, batch math, memory), each with its reason, and the error when no
strategy fits: the last steps of rmspec.plan.compile.compile_plan, kept apart so each file holds one concern."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from rmspec.errors import PlanError
from rmspec.plan.memory import GIB, TrainingShape
from rmspec.plan.packing import SHARED_PREFIX
from rmspec.plan.strategy import ladder, what_would_fit


@dataclass(frozen=True)
class Sequences:
    """The sequences one training example becomes: N of a listwise row (read from the data), and
    whether they are packed into one shared-prefix row, with that row's expected and bound length."""

    lists: bool  # N sequences per example, N read from the data
    n_list: int | None
    list_how: str | None
    packing: str
    packing_reason: str
    row_tokens: int | None = None
    row_bound: int | None = None
    pair_tokens: int | None = None
    packed_how: str | None = None

    @property
    def packed(self) -> bool:
        return self.packing == SHARED_PREFIX


def strategy_fields(training, hw, choice, precision) -> dict:
    """The plan's strategy, precision and gradient checkpointing, each with its reason."""
    rung = choice.rung
    fsdp = rung.strategy.startswith("fsdp")
    ckpt_reason = {
        "on": "training.gradient_checkpointing: on",
        "off": "training.gradient_checkpointing: off",
    }.get(
        training.gradient_checkpointing,
        "auto: needed to fit" if rung.checkpointing else "auto: not needed, activations fit",
    )
    return {
        "strategy": rung.strategy,
        "strategy_reason": (
            f"hardware.strategy: {hw.strategy} in the spec{mesh_note(hw)}"
            if hw.strategy != "auto"
            else f"cheapest of {', '.join(r.label for r in ladder(hw, training.gradient_checkpointing))} "
            f"that fits at micro batch 1"
        ),
        "refused": tuple({"strategy": label, "reason": why} for label, why in choice.refused),
        "precision": precision.compute,
        "mixed_precision": precision.mixed_precision,
        "master_weights_fp32": precision.master_fp32,
        "precision_reason": precision.reason,
        "gradient_checkpointing": rung.checkpointing,
        "gradient_checkpointing_by": (("accelerate_fsdp" if fsdp else "model") if rung.checkpointing else None),
        "gradient_checkpointing_reason": ckpt_reason,
    }


def mesh_note(hw) -> str:
    """fsdp_hybrid_shard's 2-D mesh, in the strategy's reason."""
    if hw.strategy != "fsdp_hybrid_shard":
        return ""
    return (
        f" (HSDP: a mesh of {hw.nodes} replicas x {hw.gpus_per_node} shards; each parameter sharded over a node's "
        f"{hw.gpus_per_node} processes, replicated on each of the {hw.nodes} nodes)"
    )


def batch_fields(training, hw, choice, base: TrainingShape, seqs: Sequences, attends: str | None) -> dict:
    """The plan's processes, batch split, sequence layout and packing (``attends``: memory.packed_attention)."""
    return {
        "num_processes": hw.num_processes,
        "num_machines": hw.nodes,
        "processes_per_node": hw.gpus_per_node,
        "global_batch_size": training.global_batch_size,
        "micro_batch_size": choice.micro_batch,
        "gradient_accumulation_steps": choice.grad_accum,
        "micro_batch_reason": choice.micro_reason,
        "sequences_per_example": base.seqs_per_example,
        "max_length": training.max_length,
        "tokens_per_step": training.global_batch_size * base.seqs_per_example * base.seq_len,
        "packing": seqs.packing,
        "packing_reason": seqs.packing_reason,
        "packed_attention": attends,
        "packing_tokens": (
            {
                "row_tokens_expected": seqs.row_tokens,
                "pair_tokens_unpacked_expected": seqs.pair_tokens,
                "row_tokens_bound": seqs.row_bound,
                "source": seqs.packed_how,
                "per": "list" if seqs.lists else "pair",  # what one row holds: a prompt's ranked list, or a pair
            }
            if seqs.packed and seqs.row_bound is not None  # one sequence per packed row: none
            else None
        ),
    }


def memory_fields(hw, choice, host_usable: float | None) -> dict:
    """The plan's memory per device and per node, with the rule that adds it up."""
    return {
        "memory_per_device_gb": choice.memory.gb(),
        "memory_rule": (
            "peak = weights + optimizer + buffers + overhead + max(activations + temporary"
            f"{' + gradients' if choice.memory.grads_held else ''}, gradients + step_temporary)"
        ),
        "device_capacity_gb": round(hw.capacity_per_process_gb, 3),
        "device_usable_gb": round(hw.usable_gb, 3),
        "cpu_memory_per_node_gb": round(choice.memory.cpu_per_node / GIB, 3),
        "cpu_memory_usable_gb": None if host_usable is None else round(host_usable, 3),
    }


def raise_nothing_fits(shape, base, hw, training, has_lora, fixed_micro, packed_list: int | None = None) -> NoReturn:
    from rmspec.plan.strategy import _fits as fits
    from rmspec.plan.strategy import evaluate

    lines = []
    micro = fixed_micro or 1
    for rung in ladder(hw, training.gradient_checkpointing):
        mem = evaluate(shape, base, rung, hw, micro, training.global_batch_size)
        extra = f", host {mem.cpu_per_node / GIB:.0f} GB per node" if mem.cpu_per_node else ""
        _, why = fits(mem, hw)
        lines.append(
            f"  {rung.label}: {why}"
            if why.startswith("needs")
            else f"  {rung.label}: {mem.total / GIB:.1f} GB per device{extra}" + (f": {why}" if why else "")
        )
    seq_len_for = None
    if packed_list:  # a listwise row is bounded by N x max_length
        seq_len_for = lambda length: packed_list * length  # noqa: E731
    elif base.packed:  # a row is max_length + the longest response (<= max_length): shorter max_length, shorter row
        longest_response = base.seq_len - training.max_length
        seq_len_for = lambda length: length + min(longest_response, length)  # noqa: E731
    alternatives = what_would_fit(
        shape, base, hw, checkpointing=training.gradient_checkpointing, has_lora=has_lora, seq_len_for=seq_len_for
    )
    if fixed_micro is not None and fixed_micro > 1:
        from rmspec.plan.strategy import choose

        found = choose(
            shape,
            base,
            hw,
            global_batch=training.global_batch_size,
            checkpointing=training.gradient_checkpointing,
            fixed_micro=None,
        )
        if found:
            alternatives.insert(
                0,
                f"a smaller micro batch: training.micro_batch_size: auto (picks {found.micro_batch} "
                f"with {found.rung.label}, {found.memory.total / GIB:.1f} GB per device)",
            )
    n = hw.num_processes
    message = (
        f"nothing fits: {shape.num_parameters / 1e9:.2f}B parameters, max_length {training.max_length}, "
        f"micro batch {micro} on {n} x {hw.label} ({hw.usable_gb:.1f} GB usable per device):\n" + "\n".join(lines)
    )
    hint = (
        ("what would fit:\n    - " + "\n    - ".join(alternatives))
        if alternatives
        else ("no single change fits; combine LoRA, a shorter max_length and more devices")
    )
    raise PlanError(message, hint=hint)
