"""Context parallelism for prompt-once rows: one packed row split across the N ranks of a group, exact.

A packed row ``[prompt | chosen | rejected]`` (or a prompt and a ranked list; rmspec.inference.prefix_mask
lays it out) is cut along the sequence into 2N equal chunks; rank r holds chunk r and chunk 2N-1-r (one
early, one late, so each rank has about the same causal work: Llama 3's layout, REFERENCE 20). Each rank
runs the whole model on its own tokens with their global position ids. In every attention layer the keys
and values (after RoPE) are all-gathered over the group and the rank's queries attend all of them through
its slice of rmspec's own mask (prefix_mask.allowed: chosen and rejected see the prompt, never each other;
sliding windows on positions), so every token's attention is the one a single process computes.

The attention is rmspec's packed attention (rmspec.inference.packed_attention, registered with transformers'
AttentionInterface under ``ATTENTION_NAME``): any decoder transformers loads runs it, no model class is
patched. On CPU, a row wider than a block attends by blocks (rmspec.inference.block_attention: only the key
ranges the mask allows, no mask tensor); elsewhere with SDPA through the rank's float mask slice, made once
for every layer (prefix_mask.additive_mask). Models loaded for ``sdpa`` or ``eager`` take it; flash attention
takes no custom mask and flex attention wants a BlockMask, both are refused (ContextParallelError) with the
reason.

Gradients flow through the collectives: the all-gather's backward sums the key/value gradients of every
rank's queries and hands each rank its own chunk (a reduce-scatter); the rewards, read on the rank that
holds each response's last token, are summed over the group with an identity backward. Every rank then
holds the same rewards and computes the same loss, and each rank's parameter gradients are its share: the
group's gradients ADD UP to one process's (all-reduce SUM over the context-parallel group, not a mean).
Works on gloo (CPU) and NCCL. tests/test_context_parallel.py holds it to one process within 1e-5.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from rmspec.inference.packed_attention import ATTENTION_NAME, gathering, register
from rmspec.inference.packed_forward import StatesAt, block_plan_for, compute_dtype, head_module
from rmspec.inference.prefix_mask import (
    MASKED_ATTENTION,
    NotPackable,
    PackedRows,
    additive_mask,
    allowed_by_layer_type,
    attention_implementation,
    is_causal,
    model_config,
    unwrapped,
)

SUPPORTED = MASKED_ATTENTION  # the implementations a model may be loaded with: sdpa, eager


class ContextParallelError(ValueError):
    """This model or batch cannot run under context parallelism (the reason says why and what to do)."""


# ---------------------------------------------------------------- the layout


@dataclass(frozen=True)
class Shard:
    """One rank's share of a row of ``width`` columns (``width`` a multiple of 2 x size)."""

    rank: int
    size: int
    width: int
    local: torch.Tensor  # the columns this rank holds, in its order: chunk rank, then chunk 2N-1-rank
    gathered: torch.Tensor  # the column order of the all-gathered keys: rank 0's local, rank 1's, ...


def balanced_columns(width: int, size: int, rank: int) -> torch.Tensor:
    """Columns of chunk ``rank`` and chunk ``2 size - 1 - rank`` of ``width`` cut in 2 x ``size`` chunks."""
    if width % (2 * size):
        raise ContextParallelError(f"a row of {width} columns does not cut into {2 * size} equal chunks")
    c = width // (2 * size)
    early = torch.arange(rank * c, (rank + 1) * c)
    late = torch.arange((2 * size - 1 - rank) * c, (2 * size - rank) * c)
    return torch.cat([early, late])


def shard(width: int, size: int, rank: int) -> Shard:
    gathered = torch.cat([balanced_columns(width, size, r) for r in range(size)])
    return Shard(rank, size, width, balanced_columns(width, size, rank), gathered)


def pad_columns(rows: PackedRows, multiple: int, pad_token_id: int = 0) -> PackedRows:
    """``rows`` right-padded to a width that is a multiple of ``multiple`` (padding is group -1: it attends
    itself only and nothing attends it); ``ends`` re-indexed to the new width."""
    n, width = rows.input_ids.shape
    extra = -width % multiple
    if not extra:
        return rows

    def pad(t: torch.Tensor, value: int) -> torch.Tensor:
        return torch.cat([t, torch.full((n, extra), value, dtype=t.dtype, device=t.device)], dim=1)

    ends = (rows.ends // width) * (width + extra) + rows.ends % width
    return PackedRows(
        pad(rows.input_ids, pad_token_id), pad(rows.position_ids, 0), pad(rows.group, -1), pad(rows.branch, 0), ends
    )


# ---------------------------------------------------------------- collectives with gradients


class _GatherSequence(torch.autograd.Function):
    """All-gather along dim 2 (the sequence of [batch, heads, seq, dim]); backward: each rank gets the sum of
    every rank's gradient for its own chunk (reduce-scatter on NCCL; all-reduce and slice where the
    backend has no reduce-scatter, as gloo)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        ctx.rank = dist.get_rank(group)
        ctx.size = dist.get_world_size(group)
        ctx.length = x.shape[2]
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(ctx.size)]
        dist.all_gather(parts, x, group=group)
        return torch.cat(parts, dim=2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous()
        if dist.get_backend(ctx.group) == dist.Backend.NCCL:
            chunks = [c.contiguous() for c in grad.split(ctx.length, dim=2)]
            out = torch.empty_like(chunks[ctx.rank])
            dist.reduce_scatter(out, chunks, group=ctx.group)
            return out, None
        dist.all_reduce(grad, group=ctx.group)
        return grad.narrow(2, ctx.rank * ctx.length, ctx.length).contiguous(), None


class _SumOverRanks(torch.autograd.Function):
    """Forward: the sum over the group (every rank gets it). Backward: identity, so each rank's gradient
    flows only into what it contributed, and the group's parameter gradients add up to the whole."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        out = x.clone().contiguous()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def gather_sequence(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    return _GatherSequence.apply(x, group)


def sum_over_ranks(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    return _SumOverRanks.apply(x, group)


# ---------------------------------------------------------------- the attention


@contextlib.contextmanager
def active(group: Any) -> Iterator[None]:
    """A split forward (or training step) under way: every packed attention gathers the group's keys and values."""
    with gathering(lambda t: gather_sequence(t, group)):
        yield


def check_supported(config: Any) -> None:
    """Raise ContextParallelError with the reason where this model cannot run under context parallelism."""
    impl = attention_implementation(config)
    if getattr(config, "is_encoder_decoder", False) or not is_causal(config):
        raise ContextParallelError(
            f"{config.model_type} attends in both directions: context parallelism here is for causal decoders"
        )
    if impl not in (*SUPPORTED, ATTENTION_NAME):
        raise ContextParallelError(
            f"attention {impl!r} cannot take context parallelism: it needs a custom mask per rank "
            f"(flash attention takes none, flex attention a BlockMask); load the model with one of {list(SUPPORTED)}"
        )


def use_context_parallel_attention(model: Any) -> None:
    """Switch ``model`` (loaded with sdpa or eager) to the packed attention for good (benches, tests; a run
    switches it per step: packed_attention.step)."""
    config = model_config(model)
    check_supported(config)
    register()
    unwrapped(model).set_attn_implementation(ATTENTION_NAME)


# ---------------------------------------------------------------- the forward pass


def read_head(model: Any) -> tuple[torch.nn.Module, bool]:
    """(the module whose per-token outputs are read, whether it is a causal LM's head): a reward model's score
    head (packed_forward.head_module), else the LM head of a causal LM (a generative judge: its logits at the
    positions whose next token is a label)."""
    try:
        return head_module(model), False
    except NotPackable:
        inner = unwrapped(model)
        if hasattr(inner, "get_base_model"):
            inner = inner.get_base_model()  # peft
        lm_head = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
        if not isinstance(lm_head, torch.nn.Module):
            raise
        return lm_head, True


def head_outputs(model: Any, rows: PackedRows, group: Any = None, states: StatesAt | None = None) -> torch.Tensor:
    """Head outputs [responses, num_labels] at the last token of every response of ``rows`` (the whole
    batch, identical on every rank of ``group``), each rank computing its two chunks of every row.

    The equal of packed_forward.packed_head_outputs in one process, in the order of ``rows.ends`` (group order,
    then response order): a pair's chosen and rejected, or a ranked list's K responses, each read on the rank
    that holds its last token, wherever the row's cut puts it (any flat index: a PRM's steps, the positions before a
    judge's verdict tokens). The head is ``read_head``'s: a score head, or a causal LM's LM head, asked for logits
    at this rank's read columns only (``logits_to_keep``). ``model`` must run ``ATTENTION_NAME``
    (use_context_parallel_attention). The one split forward: rmspec.train.context_parallel_run.split_head_outputs
    calls it for every approach that trains split. ``states``: filled with the score head's input at the
    positions of its request that this rank holds (and their indices into it)."""
    config = model_config(model)
    if attention_implementation(config) != ATTENTION_NAME:
        raise ContextParallelError(
            f"the model runs {attention_implementation(config)!r}: call use_context_parallel_attention first"
        )
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    unpadded = rows.input_ids.shape[1]
    rows = pad_columns(rows, 2 * size, getattr(config, "pad_token_id", None) or 0)
    width = rows.input_ids.shape[1]
    mine = shard(width, size, rank)
    device = rows.input_ids.device
    plan = block_plan_for(model, rows, mine.local)
    if plan is None:  # one float mask for every layer (prefix_mask.additive_mask): a bool one SDPA copies per layer
        masks = additive_mask(
            allowed_by_layer_type(config, rows, queries=mine.local, keys=mine.gathered), compute_dtype(model)
        )
        masks = {k: v.to(device) for k, v in masks.items()} if isinstance(masks, dict) else masks.to(device)
        extra: dict[str, Any] = {"attention_mask": masks}
    else:  # by blocks: the gathered keys go back to column order (plan.order), no mask tensor
        plan.order = torch.argsort(mine.gathered).to(device)
        extra = {"rmspec_blocks": plan}
    local = mine.local.to(device)
    where = torch.full((width,), -1, dtype=torch.long, device=device)
    where[local] = torch.arange(local.numel(), device=device)
    end_row, end_col = rows.ends.to(device) // width, rows.ends.to(device) % width
    at = where[end_col]  # each read point's local column, -1 on the rank that does not hold it
    head, lm_head = read_head(model)
    if lm_head and states is not None:
        raise ContextParallelError("hidden states are read beside a score head only")
    if lm_head:  # vocabulary logits only at the local columns this rank reads (transformers' logits_to_keep)
        held = torch.unique(at[at >= 0])  # sorted
        kept = held if held.numel() else torch.zeros(1, dtype=torch.long, device=device)
        extra["logits_to_keep"] = kept
        at = torch.where(at >= 0, torch.searchsorted(kept, at.clamp(min=0)), at)
    captured: list[torch.Tensor] = []
    hidden: list[torch.Tensor] = []

    def hook(_m: Any, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        captured.append(out)
        hidden.append(args[0])

    handle = head.register_forward_hook(hook)
    try:
        with active(group):
            model(
                input_ids=rows.input_ids[:, local],
                position_ids=rows.position_ids[:, local],
                **extra,
            )
    finally:
        handle.remove()
    if not captured or captured[-1].dim() != 3:
        raise ContextParallelError("the score head does not see every token (it pools before the head)")
    per_token = captured[-1]  # [rows, local columns (the LM head: the kept ones), labels or vocabulary]
    if states is not None:  # the request's positions in this rank's columns
        wanted = states.at.to(device)
        local_at = where[wanted % unpadded]
        states.held = (local_at >= 0).nonzero().squeeze(1)
        states.states = hidden[-1][wanted[states.held] // unpadded, local_at[states.held]]
    held = (at >= 0)[:, None]
    values = torch.where(held, per_token[end_row, at.clamp(min=0)], torch.zeros((), dtype=per_token.dtype))
    return sum_over_ranks(values, group)
