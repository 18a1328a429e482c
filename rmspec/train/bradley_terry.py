"""Pairwise Bradley-Terry training: chosen and rejected in one forward pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rmspec.train.base_trainer import ScoreTrainer
from rmspec.train.losses import pair_metrics
from rmspec.train.objectives.margins import margin_bradley_terry_loss
from rmspec.train.objectives.sft import sft_regularized_loss
from rmspec.train.objectives.ties import davidson_loss
from rmspec.train.packing import is_packed, packed_pair_rewards
from rmspec.train.pair_extras import EXTRA_MODULES, LM_HEAD_MODULE, chosen_response_labels, packed_pair_sft, sft_term
from rmspec.train.rewards import forward_scores, position_ids_from_mask
from rmspec.train.vision_packing import is_vision_packed, packed_vision_pair_rewards
from rmspec.vision.collate import vision_inputs


def pair_rewards(model, inputs: dict[str, torch.Tensor], split: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) rewards of a batch, from one forward pass: 2B rows from PairCollator, or
    shared-prefix rows from PackedPairCollator (each prompt computed once), each row split over the
    context-parallel group ``split`` (rmspec.train.context_parallel_run.Groups) where one is given."""
    if split is not None:
        from rmspec.train.context_parallel_run import split_pair_rewards

        return split_pair_rewards(model, inputs, split)
    if is_vision_packed(inputs):  # image rows, prompt-once with M-RoPE positions
        return packed_vision_pair_rewards(model, inputs)
    if is_packed(inputs):
        return packed_pair_rewards(model, inputs)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    scores = forward_scores(model, ids, mask, inputs.get("token_type_ids"), vision_inputs(inputs))[:, 0]
    half = scores.shape[0] // 2
    return scores[:half], scores[half:]


class BradleyTerryTrainer(ScoreTrainer):
    sort_eval_by_length = True  # pair metrics do not depend on order

    def __init__(
        self,
        *args,
        use_margin: bool = False,
        center_rewards_coefficient: float | None = None,
        margin_mode: str | None = None,
        tie: torch.nn.Module | None = None,
        sft_weight: float = 0.0,
        tie_learning_rate: float | None = None,
        **kwargs,
    ):
        kwargs.setdefault("compute_metrics", compute_pair_metrics)
        super().__init__(*args, **kwargs)
        self.margin_mode = margin_mode or ("subtract" if use_margin else "none")
        self.center_rewards_coefficient = center_rewards_coefficient
        self.tie = tie  # the Davidson tie parameter (ties: davidson), attached to the model
        self.sft_weight = sft_weight
        # A learned nu is one scalar: at the model's rate it stays near its start in a short run
        # (0.999 after 30 steps at 5e-5), so it trains in its own group at 100x that rate by default.
        self.tie_learning_rate = tie_learning_rate or 100 * self.args.learning_rate

    def create_optimizer(self, model=None):
        """The Trainer's optimizer, plus log nu (a learned Davidson tie parameter) in a group of its own:
        its own learning rate and no weight decay (decay would pull nu towards 1, not towards the
        tie rate). The schedule scales this group as it scales the others."""
        log_nu = getattr(self.tie, "log_nu", None)
        if self.optimizer is not None or not isinstance(log_nu, torch.nn.Parameter) or not log_nu.requires_grad:
            return super().create_optimizer(model)
        log_nu.requires_grad_(False)  # keeps it out of the Trainer's decay / no-decay groups
        try:
            optimizer = super().create_optimizer(model)
        finally:
            log_nu.requires_grad_(True)
        optimizer.add_param_group({"params": [log_nu], "lr": self.tie_learning_rate, "weight_decay": 0.0})
        return optimizer

    def splits_rows(self) -> bool:
        """Whether hardware.context_parallel can split this trainer's rows (rmspec.train.context_parallel_run.attach):
        yes, with its extra heads (ODIN, ensembles: rmspec.train.heads) and its SFT term, all read from the split
        forward (tests/test_context_parallel_heads.py, test_packing_sft.py)."""
        return True

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        by_pair = None  # the SFT term by pair, on prompt-once rows
        if self.sft_weight and is_packed(inputs):  # split over the group where there is one
            lm_head = getattr(self.accelerator.unwrap_model(model), LM_HEAD_MODULE)
            chosen, rejected, by_pair = packed_pair_sft(model, inputs, lm_head, self.context_parallel)
            lm_loss = by_pair.mean()
        elif self.sft_weight:
            chosen, rejected, lm_loss = self._rewards_and_lm_loss(model, inputs)
        else:
            # each row split over the context-parallel group where there is one, in training and evaluation
            chosen, rejected = pair_rewards(model, inputs, self.context_parallel)
        tie = inputs.get("tie")
        loss = self.pair_loss(chosen, rejected, self._margin(inputs), tie)
        if self.sft_weight:
            loss = sft_regularized_loss(loss, lm_loss, self.sft_weight)
        if model.training:
            wins = ~tie.bool() if tie is not None else slice(None)
            self.record(pair_metrics(chosen[wins], rejected[wins]))
            if self.tie is not None:
                self.record({"tie_nu": self.tie.nu})
            if self.sft_weight:
                self.record({"sft_loss": lm_loss.item()})
        if return_outputs:
            return loss, {"chosen": chosen, "rejected": rejected, "tie": tie, "sft": by_pair}
        return loss

    def pair_loss(
        self, chosen: torch.Tensor, rejected: torch.Tensor, margin: torch.Tensor | None, tie: torch.Tensor | None
    ) -> torch.Tensor:
        """The pairs' loss from their rewards (margins and ties where the approach reads them)."""
        if self.tie is not None:
            return davidson_loss(chosen, rejected, tie, self.tie.log_nu, self.center_rewards_coefficient)
        return margin_bradley_terry_loss(
            chosen,
            rejected,
            None if margin is None else margin.to(chosen.dtype),
            self.margin_mode,
            center_coefficient=self.center_rewards_coefficient,
        )

    def _margin(self, inputs: dict) -> torch.Tensor | None:
        return inputs["margin"] if self.margin_mode != "none" else None

    def first_rows_loss(self, out: dict, inputs: dict, rows: int) -> torch.Tensor:
        margin, tie = self._margin(inputs), out["tie"]
        loss = self.pair_loss(
            out["chosen"][:rows],
            out["rejected"][:rows],
            None if margin is None else margin[:rows],
            None if tie is None else tie[:rows],
        )
        if out.get("sft") is not None:  # split rows are packed: the SFT term by pair
            loss = sft_regularized_loss(loss, out["sft"].mean(rows), self.sft_weight)
        return loss

    def _rewards_and_lm_loss(self, model, inputs):
        """One forward over the 2B sequences (rows not packed: training.packing off, or an attention that takes no
        mask): rewards from the score head, and the LM loss of the chosen response from the last hidden states
        through the kept LM head."""
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        out = model(
            input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask), output_hidden_states=True
        )
        scores = out.logits[:, 0]
        half = scores.shape[0] // 2
        labels = chosen_response_labels(ids[:half], ids[half:], mask[:half])
        lm_head = getattr(self.accelerator.unwrap_model(model), LM_HEAD_MODULE)
        return scores[:half], scores[half:], sft_term(lm_head, out.hidden_states[-1][:half], labels)

    def save_model(self, output_dir=None, _internal_call=False):
        """The final model (not a checkpoint) is saved without the recipe modules: a plain classifier."""
        model = self.accelerator.unwrap_model(self.model)
        extras = (
            {}
            if _internal_call
            else {name: model._modules.pop(name) for name in EXTRA_MODULES if name in model._modules}
        )
        try:
            super().save_model(output_dir, _internal_call)
        finally:
            for name, module in extras.items():
                model.add_module(name, module)

    def eval_outputs(self, out, inputs):
        columns = [out["chosen"], out["rejected"]]
        if self.tie is not None:
            columns.append(out["tie"].to(out["chosen"].dtype))
        logits = torch.stack(columns, dim=1).float()
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
