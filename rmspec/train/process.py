"""Process reward models: a 2-label token classifier read at the last token of every step.

The loss is the token-classification cross-entropy of TRL's PRMTrainer (mean over the labelled
tokens of the batch; every other token is -100). `train_on: last_step` keeps only each row's
last labelled token during training (an outcome model); evaluation always scores every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rmspec.evaluate.scoring_rules import first_error
from rmspec.inference.padding import pad_right
from rmspec.inference.process import correct_probability as _probability
from rmspec.train.base_trainer import ScoreTrainer
from rmspec.train.rewards import position_ids_from_mask

IGNORE = -100


@dataclass
class StepCollator:
    """Batches of input_ids [B, T] and per-token labels [B, T] (-100 on padding and unlabelled tokens)."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        ids, mask = pad_right([r["input_ids"] for r in rows], self.pad_token_id, self.pad_to_multiple_of)
        labels = torch.full_like(ids, IGNORE)
        for i, r in enumerate(rows):
            labels[i, : len(r["labels"])] = torch.as_tensor(r["labels"], dtype=torch.long)
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if rows and rows[0].get("token_type_ids") is not None:
            batch["token_type_ids"] = pad_right([r["token_type_ids"] for r in rows], 0, self.pad_to_multiple_of)[0]
        return batch


def last_step_only(labels: torch.Tensor) -> torch.Tensor:
    """Keep each row's last labelled token, -100 elsewhere."""
    labelled = labels != IGNORE
    positions = torch.arange(labels.shape[1], device=labels.device).expand_as(labels)
    last = torch.where(labelled, positions, torch.full_like(positions, -1)).max(dim=1).values
    keep = positions == last.unsqueeze(1)
    return torch.where(keep & labelled, labels, torch.full_like(labels, IGNORE))


def step_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the labelled tokens ([B, T, 2] logits, [B, T] labels in {0, 1, -100})."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)


def correct_probability(logits: torch.Tensor) -> torch.Tensor:
    """P(step correct) per token (the scoring engine's rule, so training and scoring agree)."""
    return _probability(logits.float())


class ProcessTrainer(ScoreTrainer):
    def __init__(self, *args, train_on: str = "all_steps", **kwargs):
        super().__init__(*args, **kwargs)
        self.train_on = train_on

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mask = inputs["attention_mask"]
        extra = {} if inputs.get("token_type_ids") is None else {"token_type_ids": inputs["token_type_ids"]}
        logits = model(
            input_ids=inputs["input_ids"], attention_mask=mask, position_ids=position_ids_from_mask(mask), **extra
        ).logits
        labels = inputs["labels"]
        if model.training and self.train_on == "last_step":
            labels = last_step_only(labels)
        loss = step_loss(logits, labels)
        if model.training:
            with torch.no_grad():
                on = labels != IGNORE
                prob = correct_probability(logits.detach())[on]
                gold = labels[on]
                self.record(
                    {
                        "step_accuracy": ((prob >= 0.5).long() == gold).float().mean().item() if gold.numel() else 0.0,
                        "wrong_step_share": (gold == 0).float().mean().item() if gold.numel() else 0.0,
                    }
                )
        return (loss, {"logits": logits}) if return_outputs else loss

    def eval_outputs(self, out, inputs):
        return correct_probability(out["logits"]), inputs["labels"]


def process_metrics(threshold: float = 0.5):
    """compute_metrics: step accuracy, AUROC of P(correct) against the step labels, first-error accuracy."""

    def compute(eval_pred) -> dict[str, float]:
        probs = np.asarray(eval_pred.predictions, dtype=np.float64)
        labels = np.asarray(eval_pred.label_ids)
        rows = [(p[lab != IGNORE], lab[lab != IGNORE]) for p, lab in zip(probs, labels)]
        return step_metrics([list(p) for p, _ in rows], [list(lab) for _, lab in rows], threshold)

    return compute


def step_metrics(probs: list[list[float]], labels: list[list[int]], threshold: float = 0.5) -> dict[str, float]:
    """Validation metrics from per-row step probabilities and 0/1 step labels."""
    from sklearn.metrics import roc_auc_score

    flat_p = np.array([p for row in probs for p in row], dtype=np.float64)
    flat_y = np.array([y for row in labels for y in row], dtype=np.int64)
    out: dict[str, float] = {}
    if flat_y.size:
        out["step_accuracy"] = float(((flat_p >= threshold).astype(np.int64) == flat_y).mean())
        out["wrong_step_share"] = float((flat_y == 0).mean())
        if 0 < flat_y.sum() < flat_y.size:
            out["auroc"] = float(roc_auc_score(flat_y, flat_p))
    rows = [(p, y) for p, y in zip(probs, labels) if len(y)]
    if rows:
        gold = [next((i for i, v in enumerate(y) if v == 0), -1) for _, y in rows]
        pred = [first_error(list(p), threshold) for p, _ in rows]
        out["first_error_accuracy"] = float(np.mean([a == b for a, b in zip(gold, pred)]))
    return out
