"""Pointwise training: regression on one or several attributes, or ordinal classification."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch

from rmspec.train.base_trainer import ScoreTrainer
from rmspec.train.losses import masked_mse, ordinal_expectation, ordinal_loss
from rmspec.train.rewards import forward_scores
from rmspec.vision.collate import vision_inputs


class PointwiseTrainer(ScoreTrainer):
    def __init__(self, *args, objective: str = "regression", bins: int = 5, low: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.objective = objective
        self.bins = bins
        self.low = low

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        """Predicted score per attribute ([batch, attributes])."""
        if self.objective == "ordinal":
            return ordinal_expectation(logits, self.bins, self.low)
        return logits

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        logits = forward_scores(model, ids, mask, inputs.get("token_type_ids"), vision_inputs(inputs))
        target = inputs["scores"].to(logits.dtype)
        if self.objective == "ordinal":
            loss = ordinal_loss(logits, target, self.bins, self.low)
        else:
            loss = masked_mse(logits, target)
        if model.training:
            pred = self.predictions(logits.detach()).float()
            mask = ~torch.isnan(target)
            err = (pred - torch.nan_to_num(target.float())) * mask
            n = mask.sum().clamp(min=1).item()
            self.record({"mse": (err**2).sum().item() / n, "mae": err.abs().sum().item() / n})
        return (loss, {"logits": logits}) if return_outputs else loss

    def eval_outputs(self, out, inputs):
        return self.predictions(out["logits"]).float(), inputs["scores"].float()


def pointwise_metrics(attributes: list[str], weights: dict[str, float] | None = None, prompts: list[str] | None = None):
    """compute_metrics for the Trainer: MSE, MAE, Pearson, Spearman per attribute, and pairwise
    accuracy of the weighted reward among responses to the same prompt (when prompts are given,
    in evaluation order)."""
    from scipy.stats import pearsonr, spearmanr

    w = np.array([(weights or {}).get(a, 1.0 if not weights else 0.0) for a in attributes], dtype=np.float64)

    def compute(eval_pred) -> dict[str, float]:
        pred = np.asarray(eval_pred.predictions, dtype=np.float64).reshape(-1, len(attributes))
        gold = np.asarray(eval_pred.label_ids, dtype=np.float64).reshape(-1, len(attributes))
        out: dict[str, float] = {}
        for j, name in enumerate(attributes):
            ok = ~np.isnan(gold[:, j])
            p, g = pred[ok, j], gold[ok, j]
            if p.size == 0:
                continue
            out[f"{name}/mse"] = float(np.mean((p - g) ** 2))
            out[f"{name}/mae"] = float(np.mean(np.abs(p - g)))
            constant = p.size < 2 or np.std(p) == 0 or np.std(g) == 0
            out[f"{name}/pearson"] = float("nan") if constant else float(pearsonr(p, g)[0])
            out[f"{name}/spearman"] = float("nan") if constant else float(spearmanr(p, g)[0])
        out["mse"] = float(np.nanmean((pred - gold) ** 2))
        out["mae"] = float(np.nanmean(np.abs(pred - gold)))
        if prompts is not None and len(prompts) == len(pred):
            acc = grouped_pair_accuracy(pred @ w, np.nan_to_num(gold) @ w, prompts)
            if acc is not None:
                out["accuracy"] = acc
        return out

    return compute


def grouped_pair_accuracy(pred: np.ndarray, gold: np.ndarray, groups: list[Any]) -> float | None:
    """Among responses to the same prompt with different gold rewards, the share of pairs the
    predicted reward orders the same way (a tie counts wrong)."""
    by_group: dict[Any, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        by_group[g].append(i)
    right = total = 0
    for idx in by_group.values():
        for a in range(len(idx)):
            for b in range(a + 1, len(idx)):
                i, j = idx[a], idx[b]
                if gold[i] == gold[j]:
                    continue
                hi, lo = (i, j) if gold[i] > gold[j] else (j, i)
                total += 1
                right += pred[hi] > pred[lo]
    return right / total if total else None
