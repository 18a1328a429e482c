"""Read rewards from a model: one scalar (or one row of outputs) per sequence."""

from __future__ import annotations

import torch


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counted over real tokens only, so a left-padded text sits at 0..n-1 as when alone."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last real token of each row, for left or right padding."""
    positions = torch.arange(attention_mask.shape[-1], device=attention_mask.device)
    return (positions * attention_mask.long()).argmax(-1)


def forward_scores(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    token_type_ids: torch.Tensor | None = None,
    vision: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Head outputs [batch, num_labels]; positions follow the mask so padding never shifts a score.

    The sequence-classification heads of transformers pool the rightmost non-pad token (decoders)
    or [CLS] (BERT); with a pad token that never occurs in text that is the last real token.
    """
    if vision:  # a VLM computes its own 3-D (M-RoPE) positions from the image grids: 1-D ones change the reward
        return model(input_ids=input_ids, attention_mask=attention_mask, **vision).logits
    extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        **extra,
    )
    return out.logits
