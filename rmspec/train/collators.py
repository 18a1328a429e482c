"""Collators: dynamic padding to the longest sequence of the batch, right side.

Pairs are stacked chosen-first into ONE batch of 2B sequences so the model runs once per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rmspec.inference.padding import pad_right


@dataclass
class PairCollator:
    """Bradley-Terry batches: input_ids [2B, T] (chosen rows then rejected rows), margin [B]."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        sequences = [r["chosen_input_ids"] for r in rows] + [r["rejected_input_ids"] for r in rows]
        ids, mask = pad_right(sequences, self.pad_token_id, self.pad_to_multiple_of)
        margin = torch.tensor([float(r.get("margin") or 0.0) for r in rows], dtype=torch.float32)
        batch = {"input_ids": ids, "attention_mask": mask, "margin": margin}
        if rows and "tie" in rows[0]:  # annotated ties (approach.ties: davidson)
            batch["tie"] = torch.tensor([bool(r["tie"]) for r in rows], dtype=torch.bool)
        if rows and rows[0].get("chosen_token_type_ids") is not None:
            # BERT text pairs: segment 1 marks the response, as the tokenizer gives it for (prompt, response).
            types = [r["chosen_token_type_ids"] for r in rows] + [r["rejected_token_type_ids"] for r in rows]
            batch["token_type_ids"] = pad_right(types, 0, self.pad_to_multiple_of)[0]
        return batch


@dataclass
class ScoresCollator:
    """Pointwise batches: input_ids [B, T], scores [B, attributes] (NaN where unscored)."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        ids, mask = pad_right([r["input_ids"] for r in rows], self.pad_token_id, self.pad_to_multiple_of)
        batch = {"input_ids": ids, "attention_mask": mask, "scores": score_targets(rows)}
        if rows and rows[0].get("token_type_ids") is not None:
            batch["token_type_ids"] = pad_right([r["token_type_ids"] for r in rows], 0, self.pad_to_multiple_of)[0]
        return batch


def score_targets(rows: list[dict[str, Any]]) -> torch.Tensor:
    """scores [B, attributes] of pointwise rows, NaN where an attribute is unscored (padded or packed alike)."""
    return torch.tensor(
        [[float("nan") if v is None else float(v) for v in r["scores"]] for r in rows], dtype=torch.float32
    )


@dataclass
class LMCollator:
    """Generative batches: labels padded with -100 so padding never counts in the loss."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        ids, mask = pad_right([r["input_ids"] for r in rows], self.pad_token_id, self.pad_to_multiple_of)
        labels = torch.full_like(ids, -100)
        for i, r in enumerate(rows):
            labels[i, : len(r["labels"])] = torch.as_tensor(r["labels"], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def padding_share(batches: list[dict[str, torch.Tensor]]) -> float:
    """Share of token slots that are padding over these batches."""
    slots = sum(b["attention_mask"].numel() for b in batches)
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    return 1.0 - real / slots if slots else 0.0
