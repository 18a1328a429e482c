"""The attention rmspec registers with transformers for packed rows: masked, gathered over a group, or by blocks.

A model runs it (``ATTENTION_NAME``) only while ``switched``: for one packed forward, or for a whole training
step (``step``: gradient checkpointing recomputes each layer inside the backward, which must attend as the
forward did). Any decoder transformers loads takes it through AttentionInterface; no model class is patched.
Each call attends one of two ways:
- through the 4D float mask the model was handed (rmspec.inference.prefix_mask: the whole row's mask, or a
  context-parallel rank's slice), with SDPA;
- by blocks (rmspec.inference.block_attention), when the forward passes ``rmspec_blocks``: the plan travels as
  a keyword argument, which transformers hands every layer's attention and which gradient checkpointing keeps
  for the recomputation, so no state outside the call decides what a layer attends.
Under context parallelism (rmspec.train.context_parallel) ``gathering`` is active: the keys and values are
first all-gathered over the group (its ``gather``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from rmspec.inference.block_attention import BlockPlan, attend
from rmspec.inference.prefix_mask import (
    PACKED_ATTENTION,
    NotPackable,
    attention_implementation,
    model_config,
    unwrapped,
)

ATTENTION_NAME = PACKED_ATTENTION

_GATHER: list[Callable[[torch.Tensor], torch.Tensor]] = []  # the group's all-gather while a split forward runs
_STEPS: list[Any] = []  # models switched for a whole training step, backward included


@contextlib.contextmanager
def gathering(gather: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    _GATHER.append(gather)
    try:
        yield
    finally:
        _GATHER.pop()


def attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    rmspec_blocks: BlockPlan | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """transformers' attention interface (query [rows, heads, columns, dim]; keys and values at the key/value
    heads); returns [rows, columns, heads, dim] as transformers' own functions do."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    for unsupported in ("softcap", "s_aux", "sinks"):
        if kwargs.get(unsupported) is not None:
            raise NotPackable(
                f"this model's attention uses {unsupported}, which rmspec's packed attention does not compute; "
                "train it with hardware.context_parallel: 1 and training.packing: off"
            )
    if _GATHER:
        key, value = _GATHER[-1](key), _GATHER[-1](value)
    if rmspec_blocks is not None:
        if kwargs.get("sliding_window") or kwargs.get("dropout"):
            raise NotPackable("a sliding window or attention dropout reached the block attention (usable says no)")
        if rmspec_blocks.order is not None:  # gathered order (rank 0's columns, rank 1's, ...) to column order
            key, value = key[:, :, rmspec_blocks.order], value[:, :, rmspec_blocks.order]
        scale = kwargs.get("scaling")
        out = attend(query, key, value, rmspec_blocks, query.shape[-1] ** -0.5 if scale is None else scale)
        return out.transpose(1, 2).contiguous(), None
    if attention_mask is None or attention_mask.shape[-1] != key.shape[2]:
        raise NotPackable("a packed forward needs its mask against every key, or a block plan (rmspec_blocks)")
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def _no_mask(*_args: Any, **_kwargs: Any) -> None:
    """The mask transformers builds for this implementation: none. A masked forward hands its own 4D mask
    (which transformers passes on as-is), a block forward needs none."""
    return None


def register() -> None:
    """Register ``ATTENTION_NAME`` with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, attention)
    AttentionMaskInterface.register(ATTENTION_NAME, _no_mask)


@contextlib.contextmanager
def switched(model: Any) -> Iterator[None]:
    """``model`` on ``ATTENTION_NAME``, then back on its own: checkpoints' and the final model's config.json keep
    the implementation it was loaded with."""
    register()
    inner = unwrapped(model)
    before = attention_implementation(model_config(model))
    if before != ATTENTION_NAME:
        inner.set_attn_implementation(ATTENTION_NAME)
    try:
        yield
    finally:
        if before != ATTENTION_NAME:
            inner.set_attn_implementation(before)


@contextlib.contextmanager
def step(model: Any) -> Iterator[None]:
    """One training step (forward AND backward) on ``ATTENTION_NAME``: a recomputed layer attends as it did."""
    with switched(model):
        _STEPS.append(unwrapped(model))
        try:
            yield
        finally:
            _STEPS.pop()


def recomputes_outside_step(model: Any) -> bool:
    """Whether a backward could recompute ``model``'s layers after a forward-only switch ends (gradient
    checkpointing with gradients on, outside ``step``): such a forward keeps the masked path."""
    inner = unwrapped(model)
    if not torch.is_grad_enabled() or any(s is inner for s in _STEPS):
        return False
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()  # peft
    name = (
        "is_activation_checkpointing"
        if hasattr(type(inner), "is_activation_checkpointing")
        else "is_gradient_checkpointing"
    )
    return bool(getattr(inner, name, False))
