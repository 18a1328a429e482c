"""The forward pass of a packed row in one process: the score head's output at every read point.

The model runs whole (through its wrappers, so DDP and peft hooks fire as in any step) on rows laid out by
rmspec.inference.prefix_mask, attending through the whole row's mask, or by blocks
(rmspec.inference.block_attention) where the row is wide enough and the device runs them (``block_plan_for``).
Training (rmspec.train.packing and the approaches' trainers) and scoring (rmspec.inference.shared_prefix) both
call it, so the two cannot drift apart.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from rmspec.inference.block_attention import BlockPlan, block_plan, usable
from rmspec.inference.packed_attention import recomputes_outside_step, switched
from rmspec.inference.prefix_mask import NotPackable, PackedRows, check_packable, model_config, model_masks, unwrapped

HEAD_NAMES = ("score", "classifier")


@dataclass
class StatesAt:
    """A request a packed forward fills: the head's input (the last hidden states) at the flat positions ``at``
    of the packed batch, beside the head's outputs (Bradley-Terry's SFT term reads the LM head there:
    rmspec.train.pair_extras.packed_pair_sft). ``states`` [held, hidden]: one process holds every position; a
    rank of a split forward (rmspec.train.context_parallel.head_outputs) the ones in its columns, ``held`` their
    indices into ``at``."""

    at: torch.Tensor
    states: torch.Tensor | None = None
    held: torch.Tensor | None = None


def head_module(model: Any) -> torch.nn.Module:
    """The score head of a sequence-classification model, through DDP and peft wrappers."""
    inner = unwrapped(model)
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()  # peft: the head is a ModulesToSaveWrapper, called like the head
    for name in HEAD_NAMES:
        head = getattr(inner, name, None)
        if isinstance(head, torch.nn.Module):
            return head
    raise NotPackable(f"{type(inner).__name__} has no score head ({' or '.join(HEAD_NAMES)})")


def compute_dtype(model: Any) -> torch.dtype:
    """The dtype the attention computes in, which the mask takes so that SDPA need not convert it in every
    layer: autocast's where it is on for the weights' device (mixed precision), else the weights'."""
    weights = next(p for p in model.parameters())
    kind = weights.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return weights.dtype if weights.dtype.is_floating_point else torch.float32


def has_sliding_window(config: Any) -> bool:
    """Whether any layer attends within a window (prefix_mask.allowed_by_layer_type's reading of the config)."""
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        return "sliding_attention" in set(layer_types)
    return bool(getattr(config, "sliding_window", None))


def block_plan_for(model: Any, rows: PackedRows, queries: torch.Tensor | None = None) -> BlockPlan | None:
    """The block plan of ``rows`` for ``queries`` (a context-parallel rank's columns; all by default), or None
    where this forward keeps the masked path: block_attention.usable's reasons, or a backward that could
    recompute the layers after the forward's switch ends (packed_attention.recomputes_outside_step)."""
    if keeps_mask(model, rows.input_ids.device, rows.input_ids.shape[1]):
        return None
    return block_plan(rows, queries, compute_dtype(model))


def keeps_mask(model: Any, device: torch.device, width: int) -> bool:
    """Whether a packed forward of rows ``width`` columns wide on ``device`` attends through the whole-row mask
    (block_attention.usable's reasons, or a recomputation outside the step) rather than by blocks."""
    config = model_config(model)
    why = usable(
        device,
        width,
        sliding_window=has_sliding_window(config),
        dropout=float(getattr(config, "attention_dropout", 0.0) or 0.0),
    )
    return why is not None or recomputes_outside_step(model)


def packed_head_outputs(model: Any, rows: PackedRows, states: StatesAt | None = None) -> torch.Tensor:
    """Head outputs [responses, num_labels] at the last token of every response of ``rows``; ``states`` filled
    with the head's input at its positions, where given.

    The model's own pooling reads "the rightmost non-pad token" of each row, which in a packed row is not a
    response end, so the head's per-token output is taken from a forward hook instead (the
    sequence-classification heads of transformers are a linear layer applied to every token before pooling)
    and gathered at the response ends.
    """
    config = model_config(model)
    check_packable(config)
    device = rows.input_ids.device
    plan = block_plan_for(model, rows)
    if plan is None:
        masks = model_masks(config, rows, compute_dtype(model))
        masks = {k: v.to(device) for k, v in masks.items()} if isinstance(masks, dict) else masks.to(device)
        extra: dict[str, Any] = {"attention_mask": masks}
        attending: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    else:  # no mask: the plan rides along to every layer's attention (packed_attention)
        extra, attending = {"rmspec_blocks": plan}, switched(model)
    captured: list[torch.Tensor] = []
    inputs: list[torch.Tensor] = []

    def hook(_m: Any, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        captured.append(out)
        inputs.append(args[0])

    handle = head_module(model).register_forward_hook(hook)
    try:
        with attending:
            model(input_ids=rows.input_ids, position_ids=rows.position_ids, **extra)
    finally:
        handle.remove()
    if not captured:
        raise NotPackable("the score head was not called on the token states")
    per_token = captured[-1]
    if per_token.dim() != 3:
        raise NotPackable("the score head does not see every token (it pools before the head)")
    if states is not None:
        hidden = inputs[-1]
        states.states = hidden.reshape(-1, hidden.shape[-1])[states.at.to(hidden.device)]
        states.held = torch.arange(states.at.numel(), device=hidden.device)
    return per_token.reshape(-1, per_token.shape[-1])[rows.ends.to(per_token.device)]
