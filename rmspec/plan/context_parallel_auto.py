"""hardware.context_parallel: auto: the plan picks N, the smallest split of each row that fits the device.

A whole row (N = 1) that fits keeps N = 1: no split, no section, the plan as without context parallelism.
Otherwise, where a row can be split (rmspec.plan.context_parallel.refusal: a decoder, sdpa or eager attention,
prompt-once rows, several processes), each divisor N of the processes is tried in increasing order exactly as
an explicit `hardware.context_parallel: N` would be planned (the strategy ladder fitted to a rank's share of
the row, then the gathered keys and values and the mask slice added) and the first that fits is chosen, with
a line of figures saying why. When none fits the plan stops (exit 2) with the figures per N and what would
fit; when a row cannot be split the ordinary memory refusal stands, with the reason splitting could not help.
Pure: no torch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.context_parallel import rank_row, rank_share, refusal, split_tokens
from rmspec.plan.fields import raise_nothing_fits
from rmspec.plan.hardware import HardwareProfile
from rmspec.plan.memory import GIB, TrainingShape, with_blocks
from rmspec.plan.model_shape import ModelShape
from rmspec.plan.strategy import choose, evaluate, ladder


def degrees(num_processes: int) -> list[int]:
    """The splits a row can take: the divisors of the process count above 1, smallest first."""
    return [n for n in range(2, num_processes + 1) if num_processes % n == 0]


def need_at(degree: int, shape: ModelShape, base: TrainingShape, hw: HardwareProfile, training) -> tuple[bool, float]:
    """(whether `hardware.context_parallel: degree` plans, bytes per process/rank). Where the strategy ladder
    finds a rung, the bytes are that plan's (a rank's share with its gathered keys and values and mask slice);
    where none fits, the least any rung needs at the smallest micro batch."""
    # a split row is a packed row (pointwise, process and generative pack only when split: rmspec.plan.packing)
    fitted = base if degree == 1 else rank_row(base, degree, shape, hw.is_gpu)
    fixed = None if training.micro_batch_size == "auto" else training.micro_batch_size
    held = rank_share(shape, fitted, degree, base.seq_len)

    def per_rank(mem, micro: int, checkpointing: bool):
        return mem if held is None else held(mem, micro, checkpointing)

    choice = choose(
        shape,
        fitted,
        hw,
        global_batch=training.global_batch_size,
        checkpointing=training.gradient_checkpointing,
        fixed_micro=fixed,
        held=held,
        replicas=hw.num_processes // degree,
    )
    if choice is not None:
        total = per_rank(choice.memory, choice.micro_batch, choice.rung.checkpointing).total
        return total <= hw.usable_gb * GIB, total
    micro = fixed or 1
    least = min(
        per_rank(
            evaluate(shape, fitted, rung, hw, micro, training.global_batch_size, hw.num_processes // degree),
            micro,
            rung.checkpointing,
        ).total
        for rung in ladder(hw, training.gradient_checkpointing)
    )
    return False, least


def first_fit(shape, base: TrainingShape, hw: HardwareProfile, training) -> tuple[int | None, list[tuple[int, float]]]:
    """(the smallest N above 1 that fits or None, [(N, bytes)] for every N tried)."""
    tried: list[tuple[int, float]] = []
    for degree in degrees(hw.num_processes):
        ok, total = need_at(degree, shape, base, hw, training)
        tried.append((degree, total))
        if ok:
            return degree, tried
    return None, tried


def _usable(hw: HardwareProfile) -> str:
    return f"{hw.usable_gb:.1f} GB usable ({hw.capacity_per_process_gb:g} GB less {hw.headroom:.0%} headroom)"


def _what_would_fit(shape, base: TrainingShape, hw: HardwareProfile, training, row_for) -> list[str]:
    """Computed alternatives when no split fits: each one has been planned at some N and fits."""
    out: list[str] = []
    for length in (2**k for k in range(20, 8, -1)):
        if length >= training.max_length:
            continue
        shorter = with_blocks(replace(base, seq_len=row_for(length)), shape, hw.is_gpu)
        found = _any_fit(shape, shorter, hw, training)
        if found:
            n, total = found
            out.append(
                f"fewer tokens: training.max_length: {length} (a row of {shorter.seq_len:,} tokens, "
                f"context_parallel {n}: {total / GIB:.1f} GB per device)"
            )
            break
    if training.gradient_checkpointing == "off":
        found = _any_fit(shape, base, hw, replace_training(training, gradient_checkpointing="auto"))
        if found:
            out.append(
                f"gradient checkpointing: training.gradient_checkpointing: auto (context_parallel {found[0]}: "
                f"{found[1] / GIB:.1f} GB per device)"
            )
    for factor in (2, 4, 8, 16):
        per_node = hw.gpus_per_node * factor if hw.gpus_per_node * factor <= 8 else hw.gpus_per_node
        nodes = hw.nodes if per_node != hw.gpus_per_node else hw.nodes * factor
        more = replace(hw, gpus_per_node=per_node, nodes=nodes)
        try:
            found = _any_fit(shape, base, more, training)
        except PlanError:  # the global batch does not split over that many processes
            continue
        if found:
            out.append(
                f"more devices: {nodes} node(s) x {per_node} {hw.label} (hardware.gpus_per_node, hardware.nodes), "
                f"context_parallel {found[0]}: {found[1] / GIB:.1f} GB per device"
            )
            break
    return out


def replace_training(training, **changes: Any):
    return training.model_copy(update=changes)


def _any_fit(shape, base: TrainingShape, hw: HardwareProfile, training):
    """(N, bytes) of the smallest N that fits, or None."""
    ok, total = need_at(1, shape, base, hw, training)
    if ok:
        return 1, total
    degree, tried = first_fit(shape, base, hw, training)
    return None if degree is None else (degree, tried[-1][1])


def row_length_for(base: TrainingShape, training, packed_list: int | None):
    """The row the plan sizes at a given training.max_length (rmspec.plan.fields.raise_nothing_fits's rule)."""
    if packed_list:
        return lambda length: packed_list * length
    longest_response = base.seq_len - training.max_length
    return lambda length: length + min(longest_response, length)


def choose_degree(
    setting: int | str,
    shape: ModelShape,
    base: TrainingShape,
    hw: HardwareProfile,
    training,
    *,
    attn: str,
    packed: bool,
    has_lora: bool,
    packed_list: int | None,
) -> tuple[int, str | None]:
    """(N, why it was chosen or None): the spec's number as it is, or auto's choice; PlanError with the
    figures where auto finds no N that fits."""
    if setting != "auto":
        return int(setting), None
    fits, whole = need_at(1, shape, base, hw, training)
    if fits:
        return 1, None
    candidates = degrees(hw.num_processes)
    vision = bool(shape.extra.get("vision_model_type"))
    why_not = (
        "one process: a row splits over several (hardware.gpus_per_node, hardware.nodes)"
        if not candidates
        else refusal(
            candidates[0],
            architecture=shape.architecture,
            attn=attn,
            packed=packed,
            num_processes=hw.num_processes,
            vision=vision,
        )
    )
    if why_not is not None:
        fixed = None if training.micro_batch_size == "auto" else training.micro_batch_size
        try:
            raise_nothing_fits(shape, base, hw, training, has_lora, fixed, packed_list)
        except PlanError as error:
            raise PlanError(
                f"{error.message}\n  context parallelism (hardware.context_parallel: auto) cannot split the rows: "
                f"{why_not}",
                hint=error.hint,
            ) from None
    degree, tried = first_fit(shape, base, hw, training)
    row = f"a row of {base.seq_len:,} tokens"
    if degree is not None:
        refused = "".join(f", {total / GIB:.1f} GB per rank at N={n}" for n, total in tried[:-1])
        return degree, (
            f"auto: {row} needs {whole / GIB:.1f} GB per process at N=1{refused}; "
            f"{tried[-1][1] / GIB:.1f} GB per rank at N={degree}, of {_usable(hw)}"
        )
    lines = [f"    N=1: {whole / GIB:.1f} GB per process"] + [
        f"    N={n}: {total / GIB:.1f} GB per rank ({split_tokens(base.seq_len, n)[1]:,} tokens each)"
        for n, total in tried
    ]
    split = _what_would_fit(shape, base, hw, training, row_length_for(base, training, packed_list))
    fixed = None if training.micro_batch_size == "auto" else training.micro_batch_size
    try:
        raise_nothing_fits(shape, base, hw, training, has_lora, fixed, packed_list)
    except PlanError as error:
        ordinary = error
    alternatives = _merged(split, ordinary.hint or "")
    raise PlanError(
        f"{ordinary.message}\n  split over the processes (hardware.context_parallel: auto), no N fits {row} "
        f"in {_usable(hw)}:\n" + "\n".join(lines),
        hint=("what would fit:\n    - " + "\n    - ".join(alternatives))
        if alternatives
        else "no single change fits: lower training.max_length, add devices (hardware.gpus_per_node, "
        "hardware.nodes) and train LoRA (model.lora) together",
    )


# what the split alternatives replace among rmspec.plan.strategy.what_would_fit's (computed at N = 1)
COVERS = {
    "fewer tokens": "shorter sequences",
    "gradient checkpointing": "activation checkpointing",
    "more devices": "more GPUs",
}


def _merged(split: list[str], hint: str) -> list[str]:
    """The split alternatives first, then the one-process ones of another kind (LoRA, a larger device, ...)."""
    covered = {COVERS[line.split(":", 1)[0]] for line in split}
    ordinary = [line.strip()[2:] for line in hint.splitlines() if line.strip().startswith("- ")]
    return split + [line for line in ordinary if line.split(":", 1)[0] not in covered]
