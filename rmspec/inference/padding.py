"""Right padding shared by training's collators and every scoring path.

One function so that a text is padded the same way when it is trained on, evaluated, scored
from a file or served: real tokens keep positions 0..n-1, as when the text is alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def pad_right(
    sequences: Sequence[Sequence[int]], pad_id: int, pad_to_multiple_of: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) padded on the right to the longest row."""
    width = max(len(s) for s in sequences)
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[i, : len(seq)] = 1
    return ids, mask
