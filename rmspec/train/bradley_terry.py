"""Pairwise Bradley-Terry training: chosen and rejected in one forward pass."""

from __future__ import annotations

import numpy as np
import torch

from rmspec.train.base_trainer import ScoreTrainer
from rmspec.train.losses import bradley_terry_loss, pair_metrics
from rmspec.train.packing import is_packed, packed_pair_rewards
from rmspec.train.rewards import forward_scores


def pair_rewards(model, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) rewards of a batch, from one forward pass: 2B rows from PairCollator, or
    shared-prefix rows from PackedPairCollator (each prompt computed once)."""
    if is_packed(inputs):
        return packed_pair_rewards(model, inputs)
    scores = forward_scores(model, inputs["input_ids"], inputs["attention_mask"], inputs.get("token_type_ids"))[:, 0]
    half = scores.shape[0] // 2
    return scores[:half], scores[half:]


class BradleyTerryTrainer(ScoreTrainer):
    sort_eval_by_length = True  # pair metrics do not depend on order

    def __init__(self, *args, use_margin: bool = False, center_rewards_coefficient: float | None = None, **kwargs):
        kwargs.setdefault("compute_metrics", compute_pair_metrics)
        super().__init__(*args, **kwargs)
        self.use_margin = use_margin
        self.center_rewards_coefficient = center_rewards_coefficient

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        chosen, rejected = pair_rewards(model, inputs)
        margin = inputs["margin"].to(chosen.dtype) if self.use_margin else None
        loss = bradley_terry_loss(chosen, rejected, margin, self.center_rewards_coefficient)
        if model.training:
            self.record(pair_metrics(chosen, rejected))
        if return_outputs:
            return loss, {"chosen": chosen, "rejected": rejected}
        return loss

    def eval_outputs(self, out, inputs):
        logits = torch.stack([out["chosen"], out["rejected"]], dim=1).float()
        # The evaluation loop only calls compute_metrics when labels exist: dummy ones.
        return logits, torch.zeros(logits.shape[0], device=logits.device)


def compute_pair_metrics(eval_pred) -> dict[str, float]:
    rewards = np.asarray(eval_pred.predictions, dtype=np.float64)
    chosen, rejected = rewards[:, 0], rewards[:, 1]
    return {
        "accuracy": float((chosen > rejected).mean()),
        "chosen_rewards": float(chosen.mean()),
        "rejected_rewards": float(rejected.mean()),
        "reward_margin": float((chosen - rejected).mean()),
    }
