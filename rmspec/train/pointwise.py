"""Pointwise training: regression on one or several attributes, or ordinal classification.

One process: each example [prompt + response] is its own sequence of a padded batch (ScoresCollator).

Split (hardware.context_parallel: N): each example becomes a packed row of one response (PackedScoresCollator:
rmspec.inference.prefix_mask's layout, several short examples to a row, never seeing each other), cut over the N
ranks of a group; its head outputs (every attribute, or every ordinal bin) are read at its last token on the rank
that holds it and come back whole on each rank (rmspec.train.context_parallel_run.split_head_outputs, the one split
forward Bradley-Terry and listwise read too). The loss is the one-process loss, backpropagated N times over so the
group's gradients add up (tests/test_context_parallel_pointwise.py). Evaluation splits the rows the same way.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rmspec.inference.packed_forward import packed_head_outputs
from rmspec.train.base_trainer import ScoreTrainer
from rmspec.train.collators import score_targets
from rmspec.train.losses import masked_mse, ordinal_expectation, ordinal_loss
from rmspec.train.packing import is_packed, pack_examples, packed_batch, packed_rows
from rmspec.train.rewards import forward_scores
from rmspec.vision.collate import vision_inputs


@dataclass
class PackedScoresCollator:
    """Pointwise batches as packed rows: each example one group of one response (split_shared_prefix keeps its
    last token as the response, where the head is read), several short ones to a row; the packed keys as
    PackedPairCollator's (``packed_ends`` [B]: example k's last token), plus scores [B, attributes]. Used where
    hardware.context_parallel splits the rows, whose split forward reads packed rows only."""

    pad_token_id: int
    several_per_row: bool = True

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        packed, _ = pack_examples(rows, self.pad_token_id, self.several_per_row)
        return packed_batch(packed, scores=score_targets(rows))


def score_outputs(model: Any, inputs: dict[str, torch.Tensor], split: Any = None) -> torch.Tensor:
    """Head outputs [examples, outputs] of a pointwise batch: a padded one (ScoresCollator's, images included),
    or a packed one (PackedScoresCollator's), each row split over the context-parallel group ``split``
    (rmspec.train.context_parallel_run.Groups) where one is given: the same outputs on every rank of the group."""
    if split is not None:
        from rmspec.train.context_parallel_run import split_head_outputs

        return split_head_outputs(model, inputs, split)
    if is_packed(inputs):
        return packed_head_outputs(model, packed_rows(inputs))
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    return forward_scores(model, ids, mask, inputs.get("token_type_ids"), vision_inputs(inputs))


class PointwiseTrainer(ScoreTrainer):
    def __init__(self, *args, objective: str = "regression", bins: int = 5, low: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.objective = objective
        self.bins = bins
        self.low = low

    def splits_rows(self) -> bool:
        """Whether hardware.context_parallel can split this trainer's rows (rmspec.train.context_parallel_run.attach):
        the loss reads only the head outputs at each example's last token, which every rank of the group holds
        whole, so regression, the ordinal objective and several attributes train split as in one process."""
        return type(self) is PointwiseTrainer

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        """Predicted score per attribute ([batch, attributes])."""
        if self.objective == "ordinal":
            return ordinal_expectation(logits, self.bins, self.low)
        return logits

    def score_loss(self, logits: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The batch's loss from its head outputs [B, outputs] and scores [B, attributes] (NaN: unscored)."""
        target = scores.to(logits.dtype)
        if self.objective == "ordinal":
            return ordinal_loss(logits, target, self.bins, self.low)
        return masked_mse(logits, target)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # each row split over the context-parallel group where there is one, in training and evaluation
        split = self.context_parallel
        logits = score_outputs(model, inputs, split)
        target = inputs["scores"].to(logits.dtype)
        loss = self.score_loss(logits, inputs["scores"])
        if model.training:
            pred = self.predictions(logits.detach()).float()
            mask = ~torch.isnan(target)
            err = (pred - torch.nan_to_num(target.float())) * mask
            n = mask.sum().clamp(min=1).item()
            self.record({"mse": (err**2).sum().item() / n, "mae": err.abs().sum().item() / n})
        return (loss, {"logits": logits}) if return_outputs else loss

    def first_rows_loss(self, out: dict, inputs: dict, rows: int) -> torch.Tensor:
        return self.score_loss(out["logits"][:rows], inputs["scores"][:rows])

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
