"""hardware.context_parallel: what splitting each prompt-once row over N processes costs and saves, per rank.

The layout sized here is rmspec.train.context_parallel's (REFERENCE 20): the row, padded to a multiple of
2N, is cut into 2N chunks and each rank of a group holds two of them (width / N tokens); in every layer
it all-gathers the keys and values of the whole row and attends its queries through its slice of the
prompt-once mask. Per rank, against one process holding the whole row:
- activations: the memory model's (rmspec.plan.memory.activation_bytes) at width / N tokens per row;
- gathered keys and values: 2 x width x q_dim per row and layer (transformers repeats them to every query
  head before attending through a mask: repeat_kv), kept for backward by autograd in every layer (one
  layer's with gradient checkpointing, which recomputes the gather), in place of the rank's own keys and
  values, which the gather consumes and nothing keeps;
- the mask slice: [rows, 1, width / N, width] in the compute dtype, one per attention layer type, instead of
  width x width;
- communication per optimizer step (rmspec.plan.communication.context_parallel_bytes): the forward all-gather
  receives (N-1)/N of the gathered keys and values in each layer, the backward's reduce-scatter sends as
  much, and gradient checkpointing's recompute gathers them again: (2 or 3) x layers x (N-1)/N x rows x 2 x
  width x kv_dim bytes per micro step (gloo's backward is an all-reduce, about twice that). The time
  estimate adds it on GPU plans (communication.context_parallel_communication), at its own row length.
Model states are the plan's (the group's processes each hold what the strategy gives them). Pure: no torch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.blocks import block_mask_bytes
from rmspec.plan.communication import context_parallel_bytes
from rmspec.plan.memory import (
    GIB,
    STRATEGIES,
    MemoryEstimate,
    TrainingShape,
    activation_bytes,
    packed_mask_bytes,
    saved_key_value_bytes_per_token,
    with_blocks,
)
from rmspec.plan.model_shape import ModelShape

MASKED = ("sdpa", "eager")  # the implementations whose models take the per-rank mask (prefix_mask.MASKED_ATTENTION)


def refusal(
    degree: int, *, architecture: str, attn: str, packed: bool, num_processes: int, vision: bool = False
) -> str | None:
    """Why context parallelism of ``degree`` cannot apply to this plan, or None."""
    if degree == 1:
        return None
    if num_processes % degree:
        return f"context_parallel {degree} does not divide the {num_processes} processes"
    if vision:
        return "a vision-language model's rows (images, M-RoPE positions) are not split in this version"
    if architecture != "decoder":
        return "an encoder attends in both directions: context parallelism splits a causal decoder's rows"
    if attn not in MASKED:
        return (
            f"attention {attn!r} takes no custom mask (flash attention takes none): each rank attends through its "
            f"slice of the prompt-once mask, so set model.attn_implementation to sdpa or eager (or auto)"
        )
    if not packed:
        return "context parallelism splits prompt-once rows: set training.packing to auto or shared_prefix"
    return None


def check(degree: int, **facts: Any) -> None:
    why = refusal(degree, **facts)
    if why is not None:
        raise PlanError(
            f"hardware.context_parallel: {why}",
            hint="or set hardware.context_parallel: 1 (one process holds each whole row)",
        )


def kv_traffic_bytes(shape: ModelShape, t: TrainingShape, *, degree: int, row_tokens: int, grad_accum: int) -> float:
    """Bytes each rank moves per optimizer step for the group's keys and values (forward gather, backward
    reduce-scatter, checkpointing's recompute gather) at ``t``'s micro batch and checkpointing, rows of
    ``row_tokens`` padded to 2 x ``degree`` chunks."""
    return context_parallel_bytes(
        degree=degree,
        num_layers=shape.num_layers,
        kv_dim=shape.kv_dim,
        rows_per_micro_step=t.micro_batch * t.seqs_per_example,
        width=split_tokens(row_tokens, degree)[0],
        bytes_per_element=4 if t.precision == "fp32" else 2,
        checkpointing=t.checkpointing,
        gradient_accumulation_steps=grad_accum,
    )


def split_tokens(row_tokens: int, degree: int) -> tuple[int, int]:
    """(the row padded to 2 x degree equal chunks, the tokens each rank holds)."""
    width = -(-row_tokens // (2 * degree)) * 2 * degree
    return width, width // degree


def per_rank_memory(
    shape: ModelShape, t: TrainingShape, memory: MemoryEstimate, *, degree: int, row_tokens: int
) -> tuple[MemoryEstimate, dict[str, float]]:
    """The plan's estimate at ``t`` (fitted at the rank's share of the row) with what a rank adds: the
    gathered keys and values (less its own, which the gather consumes), and its mask slice against the
    whole row in place of a square one; and those figures (bytes)."""
    width, local = split_tokens(row_tokens, degree)
    rows = t.micro_batch * t.seqs_per_example
    layers = 1 if t.checkpointing else shape.num_layers
    # attention keeps the gathered keys and values repeated to every query head (saved_key_value_bytes_per_token
    # at the whole row); the rank's own, which activation_bytes counts at its share, are consumed by the gather
    per_token = saved_key_value_bytes_per_token(shape, replace(t, packed=True))
    gathered = layers * rows * width * per_token
    own = layers * rows * local * per_token
    if t.blocks:  # by blocks: the partial blocks' masks of the rank's queries (memory.block_mask_bytes)
        mask = block_mask_bytes(rows, local, width, 4 if t.precision == "fp32" else 2)
    else:  # one float slice [local, width] for every layer
        mask = float(rows * local * width * (4 if t.precision == "fp32" else 2))
    adjusted = replace(memory, temporary=memory.temporary - packed_mask_bytes(t) + mask + gathered - own)
    return adjusted, {"gathered": gathered, "mask": mask, "own_kv": own}


def rank_share(shape: ModelShape, fitted: TrainingShape, degree: int, row_tokens: int):
    """What a rank of ``degree`` holds, as the strategy ladder judges fit (rmspec.plan.strategy.Held): the
    estimate at ``fitted`` (the rank's share of a row of ``row_tokens``) plus its gathered keys and values and
    mask slice at that micro batch; None for degree 1. Judging fit without them would take a micro batch that
    fits only before they are added."""
    if degree == 1:
        return None

    def held(memory: MemoryEstimate, micro: int, checkpointing: bool) -> MemoryEstimate:
        t = replace(fitted, micro_batch=micro, checkpointing=checkpointing)
        return per_rank_memory(shape, t, memory, degree=degree, row_tokens=row_tokens)[0]

    return held


def context_parallel_section(
    shape: ModelShape,
    t: TrainingShape,
    memory: MemoryEstimate,
    *,
    degree: int,
    row_tokens: int,
    num_processes: int,
    grad_accum: int,
    micro_batch: int,
    refused: str | None = None,
    trained: str = "",
    one_process_packed: bool = True,
) -> dict[str, Any]:
    """The plan's ``context_parallel`` section (GiB per rank): ``t`` and ``memory`` are the plan's, fitted at
    the rank's share of a row of ``row_tokens``; the one-process figures are the same row unsplit, packed as one
    process trains it (``one_process_packed``: pointwise's rows are packed only when split, so one process holds
    a padded sequence with no mask). ``trained``: the approach's packed row, as `rmspec run` trains it split (its
    declaration's packed_row)."""
    width, local = split_tokens(row_tokens, degree)
    adjusted, extra = per_rank_memory(shape, t, memory, degree=degree, row_tokens=row_tokens)
    whole = replace(t, seq_len=row_tokens, packed=one_process_packed, blocks=t.blocks and one_process_packed)
    traffic = kv_traffic_bytes(shape, t, degree=degree, row_tokens=row_tokens, grad_accum=grad_accum)
    gb = lambda b: round(b / GIB, 3)  # noqa: E731
    return {
        "degree": degree,
        "groups": num_processes // degree,
        "row_tokens": row_tokens,
        "padded_tokens": width,
        "tokens_per_rank": local,
        "activations_per_rank_gb": gb(memory.activations),
        # the plan's activations scaled to the whole row (its dtype of the residual stream kept)
        "activations_one_process_gb": gb(
            memory.activations * activation_bytes(shape, whole) / activation_bytes(shape, t)
        ),
        "gathered_kv_gb": gb(extra["gathered"]),
        "mask_per_rank_gb": gb(extra["mask"]),
        "mask_one_process_gb": gb(packed_mask_bytes(whole)),
        "total_per_rank_gb": gb(adjusted.total),
        "communication_gb_per_step": gb(traffic),
        # the key/value collectives per layer and micro step: forward gather, backward reduce-scatter, and the
        # recompute's gather with gradient checkpointing
        "kv_passes_per_micro_step": 3 if t.checkpointing else 2,
        # the groups are the data-parallel processes: examples per optimizer step
        "examples_per_step": micro_batch * grad_accum * (num_processes // degree),
        # what `rmspec run` does with it: trains it, or refuses with this reason (run_refusal)
        "run": f"planned only: rmspec run refuses it ({refused})"
        if refused
        else f"rmspec run trains it: {trained or 'prompt-once rows'}, the groups as the data-parallel replicas",
        "run_refused": refused,
    }


def check_fits(section: dict[str, Any], usable_gb: float) -> None:
    """PlanError with the figures where a rank's share does not fit its device."""
    if section["total_per_rank_gb"] > usable_gb:
        raise PlanError(
            f"hardware.context_parallel {section['degree']}: a row of {section['row_tokens']:,} tokens needs "
            f"{section['total_per_rank_gb']:.2f} GB per rank ({section['tokens_per_rank']:,} tokens each: "
            f"activations {section['activations_per_rank_gb']:.2f}, gathered keys and values "
            f"{section['gathered_kv_gb']:.2f}, mask {section['mask_per_rank_gb']:.2f}), over the "
            f"{usable_gb:.2f} GB usable",
            hint="raise hardware.context_parallel (with as many more processes), turn on "
            "training.gradient_checkpointing, or lower training.max_length",
        )


def rank_row(base: TrainingShape, degree: int, shape: ModelShape, is_gpu: bool) -> TrainingShape:
    """A rank's share of ``base``'s row: packed (a split row always is), attending by blocks or not as the whole
    row does (memory.with_blocks), ``degree``-th of its tokens."""
    whole = with_blocks(replace(base, packed=True), shape, is_gpu)
    return replace(whole, seq_len=split_tokens(base.seq_len, degree)[1])


def split_row(
    cp: int, base: TrainingShape, shape: ModelShape, attn: str, packed: bool, processes: int, is_gpu: bool
) -> TrainingShape:
    """The shape the strategy ladder fits: ``base``, or a rank's share of its row under context parallelism."""
    if cp == 1:
        return base
    vision = bool(shape.extra.get("vision_model_type"))
    check(cp, architecture=shape.architecture, attn=attn, packed=packed, num_processes=processes, vision=vision)
    return rank_row(base, cp, shape, is_gpu)


# The strategies a context-parallel run trains under. FSDP shards every parameter over all the processes
# (data x context ranks flattened into one mesh dimension, as torchtitan's dp_shard_cp); fsdp_hybrid_shard
# shards within each node (its data x context ranks) and replicates across nodes, a 2-D mesh. The groups'
# attention collectives run on their own process groups, and FSDP's reduce (a reduce-scatter, then across
# replicas an all-reduce) averages over every process as DDP's all-reduce does, so the group's gradients add
# up the same way (rmspec.train.context_parallel_run.sum_over_group); with CPU offload the parameters and
# gradients wait on the host between uses, which the split does not see (tests/test_fsdp_variants.py). DeepSpeed
# is not trained split: its engine runs the backward and reduces the gradients its own way, untested here.
SPLIT_STRATEGIES = tuple(s for s in STRATEGIES if not s.startswith("deepspeed"))


def run_refusal(spec: Any, strategy: str) -> str | None:
    """Why `rmspec run` cannot train this context-parallel plan in this version, or None. The plan still
    sizes what it refuses: the approaches that train split are wired and tested (Bradley-Terry on prompt-once
    rows under DDP or FSDP, with or without gradient checkpointing, full fine-tuning or LoRA:
    tests/test_context_parallel_run.py, test_context_parallel_lora.py, tests/test_fsdp_variants.py; its ties, ODIN
    and ensembles: test_context_parallel_heads.py, its SFT term: test_packing_sft.py; listwise,
    pointwise, process and generative with method sft (rows of one response each, read at the last token, at
    every step or before every verdict token) under DDP: test_context_parallel_listwise.py,
    test_context_parallel_pointwise.py, test_context_parallel_process.py, test_context_parallel_generative.py;
    GRPO is refused: GenerativeApproach.split_refusal); the rest would need its own reading of the split forward
    and its own test."""
    from rmspec import approaches

    declared = approaches.get(spec.approach.kind)
    if not declared.trains_split:
        trained = [n for n in approaches.names() if approaches.get(n).trains_split]
        verb = "is" if len(trained) == 1 else "are"
        return f"approach {spec.approach.kind!r} is sized but not trained split in this version ({', '.join(trained)} {verb})"
    option = declared.split_refusal(spec.approach)
    if option is not None:
        return option
    if strategy not in SPLIT_STRATEGIES:
        return (
            f"strategy {strategy!r}: the groups train under {', '.join(SPLIT_STRATEGIES)} in this version "
            "(not under DeepSpeed)"
        )
    return None


def context_parallel_of(
    cp: int, shape: ModelShape, base: TrainingShape, fitted: TrainingShape, choice, hw, spec, chosen: str | None = None
):
    """The plan's context_parallel section (None for 1); the choice's memory becomes a rank's, checked.
    ``chosen``: why hardware.context_parallel: auto chose ``cp`` (rmspec.plan.context_parallel_auto), else None.

    A group of cp ranks takes one micro batch of rows together, so only num_processes / cp micro batches
    run side by side: the choice was made with the global batch dealt to the groups (strategy.choose's
    replicas), its accumulation keeping training.global_batch_size examples per optimizer step."""
    if cp == 1:
        return None
    from rmspec import approaches

    declared = approaches.get(spec.approach.kind)
    refusal = run_refusal(spec, choice.rung.strategy)
    t = replace(fitted, micro_batch=choice.micro_batch, checkpointing=choice.rung.checkpointing)
    section = context_parallel_section(
        shape,
        t,
        choice.memory,
        degree=cp,
        row_tokens=base.seq_len,
        num_processes=hw.num_processes,
        grad_accum=choice.grad_accum,
        micro_batch=choice.micro_batch,
        refused=refusal,
        trained=declared.packed_row,
        one_process_packed=declared.shared_prefix,  # split rows are packed; one process packs only a shared prompt
    )
    choice.memory = per_rank_memory(shape, t, choice.memory, degree=cp, row_tokens=base.seq_len)[0]
    check_fits(section, hw.usable_gb)
    if chosen is not None:
        section["chosen"] = chosen
    return section
