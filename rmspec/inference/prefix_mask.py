"""Rows in which several responses share one prefix: the layout, positions and attention mask.

For a causal decoder the hidden states of a prompt do not depend on what follows it, so a pair
(or N completions of one prompt) can be computed as ONE row ``[prefix | response 1 | response 2 ...]``
where each response attends to the prefix and, causally, to itself, never to another response,
and its positions continue from the end of the prefix. The reward of each response is the head
output at its last token. Training (rmspec.train.packing) and scoring
(rmspec.inference.shared_prefix) both build their rows here, so the two cannot drift apart.

Several groups may share a row (first-fit into rows as long as the longest group), so short
pairs fill the padding a long one would leave. Groups never see each other.

The mask goes to the model as a 4D tensor: transformers' masking_utils returns a 4D mask as-is
("already prepared, or custom") for every attention implementation that takes a mask. Both SDPA and
eager get the float mask (0 or the dtype's minimum, added to the scores), made once per batch: given
a bool mask, SDPA converts it to that float mask in every layer and keeps each layer's copy for the
backward pass (a 4-layer model at 8,192 tokens peaked at 2,137 MiB with a bool mask, 1,234 MiB with one
float mask: bench/results/prefix_mask_memory.md); every layer reads the one float tensor instead.
The forward pass over such rows is rmspec.inference.packed_forward: rows wider than a block attend by blocks
there on CPU (rmspec.inference.block_attention), with no mask tensor at all.
Flash-attention 2 takes no arbitrary mask; flex attention wants a BlockMask: both are refused
here (NotPackable), and callers keep the ordinary path. Sliding-window layers get the window
applied on positions (the distance inside the unpacked sequence), as masking_utils' own
sliding_window_overlay does on indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

MASKED_ATTENTION = ("sdpa", "eager")  # implementations that read a custom 4D mask
PACKED_ATTENTION = "rmspec_packed"  # rmspec's own (rmspec.inference.packed_attention), a model's while switched


class NotPackable(ValueError):
    """This model cannot run a shared-prefix row (its attention takes no custom mask)."""


@dataclass
class Group:
    """One prefix and the responses that follow it (a pair: chosen, rejected)."""

    prefix: list[int]
    responses: list[list[int]]

    def __len__(self) -> int:
        return len(self.prefix) + sum(len(r) for r in self.responses)


def split_shared_prefix(sequences: list[list[int]]) -> Group:
    """The longest common token prefix of ``sequences``, kept so each keeps at least one own token.

    Computing any common prefix once is exact for a causal model (what a token sees is the same);
    the cap keeps a last token per response where the reward is read.
    """
    shortest = min(len(s) for s in sequences)
    if shortest == 0:
        raise ValueError("an empty sequence has no token to read a reward at")
    n = 0
    first = sequences[0]
    while n < shortest - 1 and all(s[n] == first[n] for s in sequences[1:]):
        n += 1
    return Group(list(first[:n]), [list(s[n:]) for s in sequences])


@dataclass
class PackedRows:
    """A batch of packed rows. ``ends`` are flat indices (row * width + column) of the last token of
    every response, in group order then response order; ``group`` is -1 on padding."""

    input_ids: torch.Tensor  # [rows, width]
    position_ids: torch.Tensor  # [rows, width]
    group: torch.Tensor  # [rows, width] group index, -1 on padding
    branch: torch.Tensor  # [rows, width] 0 on the prefix (and padding), k on response k (1-based)
    ends: torch.Tensor  # [responses]

    @property
    def real_tokens(self) -> int:
        return int((self.group >= 0).sum())


def assign_rows(lengths: list[int], capacity: int) -> list[list[int]]:
    """First-fit decreasing: group indices per row, no row longer than ``capacity``."""
    rows: list[list[int]] = []
    room: list[int] = []
    for g in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, free in enumerate(room):
            if lengths[g] <= free:
                rows[r].append(g)
                room[r] -= lengths[g]
                break
        else:
            rows.append([g])
            room.append(capacity - lengths[g])
    return rows


def pack_groups(
    groups: list[Group],
    pad_token_id: int,
    *,
    capacity: int | None = None,
    pad_side: str = "right",
    several_per_row: bool = True,
) -> PackedRows:
    """Lay ``groups`` out in rows; ``capacity`` defaults to the longest group (so packing never
    makes a row longer than the batch needs)."""
    lengths = [len(g) for g in groups]
    capacity = max(capacity or 0, max(lengths))
    layout = assign_rows(lengths, capacity) if several_per_row else [[g] for g in range(len(groups))]
    width = max(sum(lengths[g] for g in row) for row in layout)
    shape = (len(layout), width)
    ids = torch.full(shape, pad_token_id, dtype=torch.long)
    pos = torch.zeros(shape, dtype=torch.long)
    grp = torch.full(shape, -1, dtype=torch.long)
    br = torch.zeros(shape, dtype=torch.long)
    end_of: dict[tuple[int, int], int] = {}
    for r, row in enumerate(layout):
        col = width - sum(lengths[g] for g in row) if pad_side == "left" else 0
        for g in row:
            prefix = groups[g].prefix
            p = len(prefix)
            if p:
                ids[r, col : col + p] = torch.tensor(prefix, dtype=torch.long)
                pos[r, col : col + p] = torch.arange(p)
                grp[r, col : col + p] = g
            col += p
            for k, resp in enumerate(groups[g].responses):
                n = len(resp)
                ids[r, col : col + n] = torch.tensor(resp, dtype=torch.long)
                pos[r, col : col + n] = torch.arange(p, p + n)
                grp[r, col : col + n] = g
                br[r, col : col + n] = k + 1
                end_of[(g, k)] = r * width + col + n - 1
                col += n
    ends = torch.tensor(
        [end_of[(g, k)] for g in range(len(groups)) for k in range(len(groups[g].responses))], dtype=torch.long
    )
    return PackedRows(ids, pos, grp, br, ends)


def allowed(
    rows: PackedRows,
    sliding_window: int | None = None,
    *,
    queries: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
) -> torch.Tensor:
    """[rows, 1, queries, keys] bool: query i may attend key j (every column of the row by default).

    Same group, j not after i, and j on the prefix or on i's own response; within the window
    (counted in positions) where one applies. Padding attends itself only, so no softmax row is
    empty (its output is never read). ``queries`` and ``keys`` (column indices) give a slice of
    the mask without building the whole: context parallelism (rmspec.train.context_parallel)
    asks for one rank's queries against the gathered keys, in the gathered order.
    """
    width = rows.group.shape[1]
    qi = torch.arange(width, device=rows.group.device) if queries is None else queries.to(rows.group.device)
    ki = torch.arange(width, device=rows.group.device) if keys is None else keys.to(rows.group.device)
    gq, bq, pq = rows.group[:, qi], rows.branch[:, qi], rows.position_ids[:, qi]
    gk, bk, pk = rows.group[:, ki], rows.branch[:, ki], rows.position_ids[:, ki]
    ok = (gq[:, :, None] == gk[:, None, :]) & (gq[:, :, None] >= 0)
    ok &= qi[None, :, None] >= ki[None, None, :]
    ok &= (bk[:, None, :] == 0) | (bq[:, :, None] == bk[:, None, :])
    if sliding_window:
        ok &= (pq[:, :, None] - pk[:, None, :]) < sliding_window
    ok |= (qi[:, None] == ki[None, :])[None]
    return ok[:, None]


def additive_mask(ok: torch.Tensor | dict[str, torch.Tensor], dtype: torch.dtype):
    """The float mask(s) SDPA and eager take for bool ``ok`` (one tensor, or one per layer type): 0 where a
    query may attend, the dtype's minimum elsewhere (not -inf: every row attends at least its own token)."""
    if isinstance(ok, dict):
        return {kind: additive_mask(one, dtype) for kind, one in ok.items()}
    zero = torch.zeros((), dtype=dtype, device=ok.device)
    return torch.where(ok, zero, torch.tensor(torch.finfo(dtype).min, dtype=dtype, device=ok.device))


def attention_implementation(config: Any) -> str:
    return getattr(config, "_attn_implementation", None) or "eager"


def check_packable(config: Any) -> None:
    """Raise NotPackable with the reason when this model cannot take a shared-prefix row."""
    if getattr(config, "is_encoder_decoder", False) or not is_causal(config):
        raise NotPackable(
            f"{config.model_type} attends in both directions, so a prompt's states depend on the response after it"
        )
    impl = attention_implementation(config)
    if impl not in (*MASKED_ATTENTION, PACKED_ATTENTION):
        raise NotPackable(f"attention {impl!r} takes no custom 4D mask (shared-prefix rows need sdpa or eager)")


ENCODER_TYPES = (
    "bert",
    "roberta",
    "deberta",
    "deberta-v2",
    "electra",
    "xlm-roberta",
    "distilbert",
    "albert",
    "modernbert",
    "camembert",
    "mpnet",
)


def is_causal(config: Any) -> bool:
    archs = " ".join(getattr(config, "architectures", None) or [])
    return config.model_type not in ENCODER_TYPES and "MaskedLM" not in archs


def model_masks(config: Any, rows: PackedRows, dtype: torch.dtype) -> torch.Tensor | dict[str, torch.Tensor]:
    """The attention mask(s) to hand the model: one 4D tensor, or one per layer type where the
    model mixes full and sliding-window layers (the dict masking_utils' callers accept)."""
    check_packable(config)
    return additive_mask(allowed_by_layer_type(config, rows), dtype)


def allowed_by_layer_type(
    config: Any, rows: PackedRows, *, queries: torch.Tensor | None = None, keys: torch.Tensor | None = None
) -> torch.Tensor | dict[str, torch.Tensor]:
    """The bool mask of ``allowed``, or one per layer type where the model mixes full and
    sliding-window layers (sliced by ``queries`` and ``keys`` as ``allowed`` is)."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        kinds = set(layer_types)
        if kinds <= {"full_attention"}:
            return allowed(rows, queries=queries, keys=keys)
        if not kinds <= {"full_attention", "sliding_attention"}:
            raise NotPackable(f"layer types {sorted(kinds)} (only full and sliding-window attention are packed)")
        return {
            kind: allowed(rows, window if kind == "sliding_attention" else None, queries=queries, keys=keys)
            for kind in kinds
        }
    return allowed(rows, window, queries=queries, keys=keys)


def unwrapped(model: Any) -> Any:
    """The model under DistributedDataParallel's wrappers (a peft model stays as it is)."""
    while hasattr(model, "module") and isinstance(model.module, torch.nn.Module):
        model = model.module
    return model


def model_config(model: Any) -> Any:
    return unwrapped(model).config


def to_device(rows: PackedRows, device: Any) -> PackedRows:
    return PackedRows(*(t.to(device) for t in (rows.input_ids, rows.position_ids, rows.group, rows.branch, rows.ends)))
