"""Batched scoring: one reward per sequence, in length-sorted batches (rmspec.inference.batches: bounded by rows
and by the padded mask, so long rows are scored alone), results in input order.

Only input_ids, attention_mask and (encoders) token_type_ids reach the model, as rmspec's
trainer feeds it, padded on the right by the trainer's own pad_right, so a text gets the same
score whatever its batch (tested).

torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def head_outputs(
    model: Any,
    sequences: Sequence[Sequence[int]],
    pad_token_id: int,
    batch_size: int = 32,
    type_ids: Sequence[Sequence[int] | None] | None = None,
) -> list[list[float]]:
    """Every head output per sequence (one for a reward model, one per attribute for pointwise),
    batches sorted by length (rmspec.inference.batches), results in input order.

    ``type_ids`` (segment ids, per sequence or None) are passed to the model when given, as the
    trainer's collator does.
    """
    import torch

    from rmspec.inference import progress
    from rmspec.inference.batches import length_batches
    from rmspec.inference.padding import pad_right

    device = next(model.parameters()).device
    outputs: list[list[float]] = [[] for _ in sequences]
    with torch.inference_mode():
        for batch in length_batches([len(s) for s in sequences], batch_size):
            # The trainer's own padding, so a text is scored as it was trained on.
            input_ids, attention_mask = pad_right([sequences[i] for i in batch], pad_token_id)
            extra = {}
            if type_ids is not None and any(type_ids[i] is not None for i in batch):
                token_type_ids, _ = pad_right([type_ids[i] or [0] * len(sequences[i]) for i in batch], 0)
                extra["token_type_ids"] = token_type_ids.to(device)
            logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **extra).logits
            for i, values in zip(batch, logits.float().cpu().tolist()):
                outputs[i] = [float(v) for v in values]
            progress.advance(len(batch))  # lines only where a caller asked (rmspec.inference.progress)
    return outputs


def score_token_ids(
    model: Any,
    sequences: Sequence[Sequence[int]],
    pad_token_id: int,
    batch_size: int = 32,
    type_ids: Sequence[Sequence[int] | None] | None = None,
) -> list[float]:
    """One reward per sequence: head output 0 (see head_outputs)."""
    return [values[0] for values in head_outputs(model, sequences, pad_token_id, batch_size, type_ids)]
