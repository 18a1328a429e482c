"""Attention over a packed row by blocks: rmspec's prompt-once mask without a [queries, keys] mask tensor.

The masked path (rmspec.inference.prefix_mask) hands SDPA one float mask of the whole row, which SDPA keeps for
the backward pass: 4 bytes x queries x keys, quadratic in the row, and the kernel still computes every query-key
block (the mask only zeroes scores). Here the row's queries are cut into blocks of ``BLOCK`` columns and each
block attends only the key ranges its mask allows, classified once per step from ``prefix_mask.allowed``:
- a range every query of the block may attend wholly (the prompt before a response, a group's earlier tokens):
  one SDPA call with no mask;
- the block's own columns, when they see each other causally: one call with ``is_causal``;
- a range part allowed (a prompt-response boundary, padding, short examples side by side): one call with the
  float mask of that block alone;
- a range no query of the block may attend (the other response, another group): skipped.
The calls' outputs merge by their log-sum-exp (each call is a softmax over its own keys; the row's softmax is
their weighted sum), and the backward pass runs each call's flash backward with the MERGED output and
log-sum-exp, which gives every block its share of the row's gradient exactly (ring attention's rule). What is
kept for backward is the queries, keys and values (at the key/value heads: grouped-query keys are not
repeated), the output and the log-sum-exp: linear in the row, and the partial blocks' small masks.

It runs on torch's CPU flash kernel, whose operators return the log-sum-exp and take it back in the backward
(``_scaled_dot_product_flash_attention_for_cpu`` and its backward); other devices keep the masked path
(``usable``): a CUDA kernel with the same contract is not wired, for want of a GPU to test it on. tests/test_block_attention.py holds outputs and gradients to SDPA with the whole mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from rmspec.inference.prefix_mask import PackedRows, additive_mask, allowed, to_device
from rmspec.plan.blocks import ATTENTION_BLOCK, why_masked

BLOCK = ATTENTION_BLOCK  # query and key block, in columns; rows this wide or narrower keep the masked path (``usable``)

FULL, CAUSAL, MASKED = "full", "causal", "masked"


@dataclass(frozen=True)
class Call:
    """One SDPA call of one row: local query columns [q0, q1) against key columns [k0, k1)."""

    row: int
    q0: int
    q1: int
    k0: int
    k1: int
    kind: str  # FULL, CAUSAL or MASKED
    mask: torch.Tensor | None = None  # MASKED: [1, 1, q1 - q0, k1 - k0] float, 0 or the dtype's minimum


@dataclass
class BlockPlan:
    """The calls of every row of a batch, grouped by query block (each group's outputs merge)."""

    blocks: list[list[Call]] = field(default_factory=list)
    order: torch.Tensor | None = None  # context parallelism: the gathered keys' positions in column order

    def mask_bytes(self) -> int:
        return sum(c.mask.numel() * c.mask.element_size() for b in self.blocks for c in b if c.mask is not None)


def usable(device: torch.device, width: int, *, sliding_window: bool, dropout: float) -> str | None:
    """Why a row of ``width`` columns keeps the masked path here, or None where it attends by blocks."""
    if device.type != "cpu":
        return f"blocks run on torch's CPU flash kernel; {device.type} keeps the masked path"
    return why_masked(width, is_gpu=False, sliding_window=sliding_window, dropout=dropout, block=BLOCK)


def query_blocks(queries: torch.Tensor, segment: torch.Tensor) -> list[tuple[int, int, int]]:
    """(local start, local end, first column) of each block of ``queries`` (ascending columns, in runs of
    consecutive columns: a context-parallel rank holds two). No block crosses a run, holds over BLOCK or spans
    two segments (``segment``: one id per column of the row for each prompt and each response), so all its
    queries see the same key ranges: at most plan.blocks.PARTIAL_BLOCKS key blocks are cut by the mask (the
    group's start, the prompt's end, its own response's start) and its own columns see each other causally."""
    cols, seg = queries.tolist(), segment.tolist()
    out: list[tuple[int, int, int]] = []
    start = 0
    for i in range(1, len(cols) + 1):
        if i == len(cols) or cols[i] != cols[i - 1] + 1 or i - start == BLOCK or seg[cols[i]] != seg[cols[i - 1]]:
            out.append((start, i, cols[start]))
            start = i
    return out


def block_plan(rows: PackedRows, queries: torch.Tensor | None = None, dtype: torch.dtype = torch.float32) -> BlockPlan:
    """The calls of every row of ``rows`` for the local ``queries`` (ascending column indices; every column by
    default) against every key column in column order; the partial blocks' masks in ``dtype``."""
    n, width = rows.group.shape
    queries = torch.arange(width) if queries is None else queries.cpu()
    plan = BlockPlan()
    cpu_rows = rows if rows.group.device.type == "cpu" else to_device(rows, "cpu")
    responses = int(cpu_rows.branch.max()) + 1 if cpu_rows.branch.numel() else 1
    for r in range(n):
        one = _row(cpu_rows, r)
        segment = one.group[0] * responses + one.branch[0]  # padding (group -1) is a segment of its own
        for q0, q1, c0 in query_blocks(queries, segment):
            c1 = c0 + (q1 - q0)  # keys after the block's last column are never allowed (causal)
            ok = allowed(one, queries=torch.arange(c0, c1), keys=torch.arange(c1))[0, 0]
            calls: list[Call] = []
            edges = list(range(0, c0, BLOCK)) + [c0]
            for k0, k1 in zip(edges, edges[1:] + [c1], strict=True):
                part = ok[:, k0:k1]
                if not bool(part.any()):
                    continue
                if bool(part.all()):
                    kind, mask = FULL, None
                elif k0 == c0 and torch.equal(part, torch.ones_like(part).tril()):
                    kind, mask = CAUSAL, None
                else:
                    kind, mask = MASKED, additive_mask(part, dtype)[None, None]
                last = calls[-1] if calls else None
                if kind == FULL and last is not None and last.kind == FULL and last.k1 == k0:
                    calls[-1] = Call(r, q0, q1, last.k0, k1, FULL)  # one call over consecutive whole ranges
                else:
                    calls.append(Call(r, q0, q1, k0, k1, kind, mask))
            plan.blocks.append(calls)
    return plan


def _row(rows: PackedRows, r: int) -> PackedRows:
    return PackedRows(
        rows.input_ids[r : r + 1], rows.position_ids[r : r + 1], rows.group[r : r + 1], rows.branch[r : r + 1],
        rows.ends[:0],
    )  # fmt: skip


# ---------------------------------------------------------------- the attention and its backward

_forward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


class _BlockAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: BlockPlan, scale: float):
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
        for calls in plan.blocks:
            first = calls[0]
            parts = []
            for c in calls:
                o, s = _forward(
                    q[c.row : c.row + 1, :, c.q0 : c.q1],
                    k[c.row : c.row + 1, :, c.k0 : c.k1],
                    v[c.row : c.row + 1, :, c.k0 : c.k1],
                    0.0,
                    c.kind == CAUSAL,
                    attn_mask=c.mask,
                    scale=scale,
                )
                parts.append((o, s))
            if len(parts) == 1:
                merged, total = parts[0]
            else:  # softmax over all the calls' keys: each call's output weighted by exp(its lse - the whole's)
                total = torch.logsumexp(torch.stack([s for _, s in parts]), dim=0)
                merged = sum((torch.exp(s - total)[..., None] * o.float() for o, s in parts), torch.zeros(()))
            out[first.row : first.row + 1, :, first.q0 : first.q1] = merged
            lse[first.row : first.row + 1, :, first.q0 : first.q1] = total
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.plan, ctx.scale = plan, scale
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        grad = grad.contiguous()
        dq = torch.zeros_like(q, dtype=torch.float32)
        dk = torch.zeros_like(k, dtype=torch.float32)
        dv = torch.zeros_like(v, dtype=torch.float32)
        for calls in ctx.plan.blocks:
            for c in calls:
                rows, qs, ks = slice(c.row, c.row + 1), slice(c.q0, c.q1), slice(c.k0, c.k1)
                gq, gk, gv = _backward(
                    grad[rows, :, qs],
                    q[rows, :, qs],
                    k[rows, :, ks],
                    v[rows, :, ks],
                    out[rows, :, qs],
                    lse[rows, :, qs],
                    0.0,
                    c.kind == CAUSAL,
                    attn_mask=c.mask,
                    scale=ctx.scale,
                )
                dq[rows, :, qs] += gq
                dk[rows, :, ks] += gk
                dv[rows, :, ks] += gv
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: BlockPlan, scale: float) -> torch.Tensor:
    """Attention of queries [rows, heads, local columns, dim] over keys and values [rows, key/value heads,
    columns, dim] (column order) through ``plan``: [rows, heads, local columns, dim], as SDPA with the whole
    mask returns it. Under autocast the three are cast to its dtype first, as autocast casts SDPA's inputs (RoPE
    leaves queries and keys in the fp32 stream's dtype and values in the compute dtype), and the blocks' masks
    are in that dtype (packed_forward.compute_dtype)."""
    kind = q.device.type
    if torch.is_autocast_enabled(kind):
        dtype = torch.get_autocast_dtype(kind)
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    with torch.autocast(kind, enabled=False):
        return _BlockAttention.apply(q, k, v, plan, scale)
