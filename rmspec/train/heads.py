"""Bradley-Terry with extra score heads: ODIN's length debiasing and ensembles of heads.

Both widen the model's one-output score head (a linear layer) to K outputs on the same features:
K = 2 for ODIN (output 0 the quality head, 1 the length head), K = N for an ensemble (one output per
member). K outputs of one linear layer are exactly K linear heads on a shared backbone. Checkpoints
keep the K-wide head (a resume loads it as it was); the final model gets one output
(`finalize_heads`): ODIN's quality head, or the ensemble's mean head, whose weight and bias are the
members' means, exact for linear heads (mean_m(w_m . h + b_m) = mean(w) . h + mean(b)). The members
go beside it in `ensemble_heads.safetensors`, which rmspec's loaders read (rmspec.inference.ensemble).

"Length" for ODIN is the response's own token count (the tokenizer on the response text, no special
tokens, before any cut): it leaves out the prompt, which chosen and rejected share. With images it
is the same count of the response's text tokens: the images sit in the shared prompt, and their
visual tokens (which depend on the picture's size, not on what the response says) are not counted.

Each ensemble member trains on its own bootstrap resample (rmspec.train.objectives.ensemble.
bootstrap_indices) through a per-row, per-member weight: the number of times the row is in that
member's resample. A shared batch then gives each head exactly the gradient of its own resample's
loss (sum_i count_mi * loss_mi / B), while the backbone sees every row once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rmspec.inference.ensemble import ENSEMBLE_FILE  # noqa: F401  (final_model saves under this name)
from rmspec.inference.packed_forward import head_module
from rmspec.train.bradley_terry import BradleyTerryTrainer
from rmspec.train.losses import pair_metrics
from rmspec.train.objectives.ensemble import bootstrap_indices, ensemble_std
from rmspec.train.objectives.odin import odin_loss, pearson
from rmspec.train.packing import is_packed, packed_rows
from rmspec.train.rewards import forward_scores
from rmspec.train.vision_packing import is_vision_packed, packed_vision_pair_outputs
from rmspec.vision.collate import vision_inputs

LENGTH_COLUMNS = ("chosen_response_tokens", "rejected_response_tokens")
WEIGHT_COLUMN = "member_weight"


# ---------------------------------------------------------------- data


def with_member_weights(dataset: Any, members: int, seed: int, bootstrap: bool) -> Any:
    """Add `member_weight` [members]: how often each row is in each member's resample."""
    if dataset is None or WEIGHT_COLUMN in dataset.column_names:
        return dataset
    draws = bootstrap_indices(len(dataset), members, seed, bootstrap).numpy()
    counts = np.stack([np.bincount(d, minlength=len(dataset)) for d in draws], axis=1).astype(np.float32)
    return dataset.add_column(WEIGHT_COLUMN, counts.tolist())


class HeadCollator:
    """A pair collator plus what the extra heads need: each side's response tokens (ODIN's length,
    counted here from the texts, so any split works: training, validation, a prediction set) and
    the member weights (an ensemble's training split). The base is any pair collator: text (plain or
    packed), or for rows with images VisionPairCollator (each side its own copy of the row's images)
    or VisionPackedPairCollator (each image once per pair); `pair_outputs` reads each."""

    def __init__(self, base: Any, tokenizer: Any = None):
        self.base = base
        self.tokenizer = tokenizer  # set: count response tokens

    @property
    def encoder(self) -> Any:
        """The base collator's image side (rmspec.vision.collate.VisionEncoder), None for text: the final
        model saves its image processor (rmspec.train.final_model.save_image_processor)."""
        return getattr(self.base, "encoder", None)

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.base(rows)
        if rows and self.tokenizer is not None:
            for side, column in zip(("chosen", "rejected"), LENGTH_COLUMNS):
                ids = self.tokenizer([r[side] for r in rows], add_special_tokens=False)["input_ids"]
                batch[column] = torch.tensor([float(len(x)) for x in ids], dtype=torch.float32)
        if rows and WEIGHT_COLUMN in rows[0]:
            batch[WEIGHT_COLUMN] = torch.tensor([r[WEIGHT_COLUMN] for r in rows], dtype=torch.float32)
        return batch


# ---------------------------------------------------------------- model


def pair_outputs(model: Any, inputs: dict[str, torch.Tensor], split: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) head outputs [B, K] of a pair batch, plain or shared-prefix packed (text, or
    image rows packed prompt-once with their M-RoPE positions), each packed row split over the
    context-parallel group ``split`` (rmspec.train.context_parallel_run.Groups) where one is given: every
    rank of the group then holds every output."""
    if split is not None:
        from rmspec.train.context_parallel_run import split_head_outputs

        scores = split_head_outputs(model, inputs, split)
        return scores[0::2], scores[1::2]
    if is_vision_packed(inputs):
        return packed_vision_pair_outputs(model, inputs)
    if is_packed(inputs):
        from rmspec.inference.packed_forward import packed_head_outputs

        scores = packed_head_outputs(model, packed_rows(inputs))
        return scores[0::2], scores[1::2]
    scores = forward_scores(
        model, inputs["input_ids"], inputs["attention_mask"], inputs.get("token_type_ids"), vision_inputs(inputs)
    )
    half = scores.shape[0] // 2
    return scores[:half], scores[half:]


def head_linear(model: Any) -> nn.Linear:
    """The score head's linear layer, through DDP and peft (its trained copy in modules_to_save)."""
    head = head_module(model)
    saved = getattr(head, "modules_to_save", None)
    if saved is not None:
        active = getattr(head, "active_adapter", None)
        active = active[0] if isinstance(active, (list, tuple)) else active
        head = saved[active] if active in saved else next(iter(saved.values()))
    if not isinstance(head, nn.Linear):
        raise TypeError(f"the score head is a {type(head).__name__}, not a linear layer")
    return head


def finalize_for_spec(spec: Any) -> Any:
    """What turns the trained model into the saved one for this spec (the approach's `finalize`
    hook): with length_debias or an ensemble, the K-wide head becomes one output; else None."""
    approach = spec.approach
    if not (approach.length_debias or approach.ensemble):
        return None
    return lambda model: finalize_heads(model, approach)


def finalize_heads(model: Any, approach: Any) -> dict[str, torch.Tensor]:
    """Turn the K-wide training head into the saved one-output head, in place; returns the tensors
    to save beside the model (the ensemble's members), else {}."""
    from rmspec.train.modeling import HEAD_NAMES

    debias, ensemble = approach.length_debias, approach.ensemble
    if debias is None and ensemble is None:
        return {}
    name = next(n for n in HEAD_NAMES if isinstance(getattr(model, n, None), nn.Linear))
    head: nn.Linear = getattr(model, name)
    weight, bias = head.weight.detach(), None if head.bias is None else head.bias.detach()
    saved: dict[str, torch.Tensor] = {}
    if debias is not None:  # only the quality head is the reward
        new_weight, new_bias = weight[:1], None if bias is None else bias[:1]
    else:
        new_weight = weight.float().mean(0, keepdim=True).to(weight.dtype)
        new_bias = None if bias is None else bias.float().mean(0, keepdim=True).to(bias.dtype)
        saved = {"weight": weight.float().contiguous().cpu()}
        if bias is not None:
            saved["bias"] = bias.float().contiguous().cpu()
    new = nn.Linear(head.in_features, 1, bias=bias is not None, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        new.weight.copy_(new_weight)
        if bias is not None:
            new.bias.copy_(new_bias)
    setattr(model, name, new)
    model.config.num_labels = 1
    model.config.id2label, model.config.label2id = {0: "reward"}, {"reward": 0}
    return saved


# ---------------------------------------------------------------- trainers


class OdinTrainer(BradleyTerryTrainer):
    """ODIN's total loss (rmspec.train.objectives.odin) on output 0 (quality) and 1 (length)."""

    def __init__(self, *args, odin: Any, **kwargs):
        kwargs.setdefault("compute_metrics", odin_metrics)
        super().__init__(*args, **kwargs)
        self.odin = odin

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        chosen, rejected = pair_outputs(model, inputs, self.context_parallel)
        len_c, len_r = inputs[LENGTH_COLUMNS[0]], inputs[LENGTH_COLUMNS[1]]
        loss, parts = self.odin_total(model, chosen, rejected, len_c, len_r, inputs["margin"])
        if model.training:
            self.record({**pair_metrics(chosen[:, 0], rejected[:, 0]), **parts})
        if return_outputs:
            return loss, {"chosen": chosen, "rejected": rejected, "len_c": len_c, "len_r": len_r}
        return loss

    def odin_total(self, model, chosen, rejected, len_c, len_r, margin) -> tuple[torch.Tensor, dict[str, float]]:
        """ODIN's loss and its terms from the heads' outputs [B, 2], the response lengths and the margins."""
        head = head_linear(model)
        return odin_loss(
            chosen[:, 0],
            rejected[:, 0],
            chosen[:, 1],
            rejected[:, 1],
            len_c,
            len_r,
            head.weight[0],
            head.weight[1],
            lambda_length=self.odin.lambda_length,
            lambda_quality=self.odin.lambda_quality,
            lambda_ortho=self.odin.lambda_ortho,
            margin=margin.to(chosen.dtype) if self.margin_mode == "subtract" else None,
            center_coefficient=self.center_rewards_coefficient,
        )

    def first_rows_loss(self, out: dict, inputs: dict, rows: int) -> torch.Tensor:
        first = {k: out[k][:rows] for k in ("chosen", "rejected", "len_c", "len_r")}
        return self.odin_total(self.model, **first, margin=inputs["margin"][:rows])[0]

    def eval_outputs(self, out, inputs):
        c, r = out["chosen"].float(), out["rejected"].float()
        # columns: quality c, r (the saved reward), length head c, r, response tokens c, r
        logits = torch.stack([c[:, 0], r[:, 0], c[:, 1], r[:, 1], out["len_c"].float(), out["len_r"].float()], dim=1)
        return logits, torch.zeros(logits.shape[0], device=logits.device)

    @staticmethod
    def served_rewards(predictions: np.ndarray) -> np.ndarray:
        """The saved reward's columns of the predictions (for the normalisation statistics)."""
        return np.asarray(predictions)[:, :2]


def odin_metrics(eval_pred) -> dict[str, float]:
    p = np.asarray(eval_pred.predictions, dtype=np.float64)
    quality, length_head, tokens = p[:, 0:2].T.ravel(), p[:, 2:4].T.ravel(), p[:, 4:6].T.ravel()
    corr = lambda a: float(pearson(torch.from_numpy(a), torch.from_numpy(tokens)))  # noqa: E731
    both = p[:, 0:2] + p[:, 2:4]
    return {
        "accuracy": float((p[:, 0] > p[:, 1]).mean()),
        "chosen_rewards": float(p[:, 0].mean()),
        "rejected_rewards": float(p[:, 1].mean()),
        "reward_margin": float((p[:, 0] - p[:, 1]).mean()),
        "quality_length_corr": corr(quality),  # the saved reward's Pearson correlation with response tokens
        "length_head_corr": corr(length_head),
        "sum_length_corr": corr(both.T.ravel()),
        "sum_accuracy": float((both[:, 0] > both[:, 1]).mean()),  # quality + length, what Bradley-Terry trained
        "chosen_longer": float((p[:, 4] > p[:, 5]).mean()),
    }


class EnsembleTrainer(BradleyTerryTrainer):
    """Each member's Bradley-Terry loss on its own resample (row weights); the loss is their mean."""

    def __init__(self, *args, members: int, **kwargs):
        kwargs.setdefault("compute_metrics", ensemble_metrics)
        super().__init__(*args, **kwargs)
        self.members = members

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        chosen, rejected = pair_outputs(model, inputs, self.context_parallel)  # [B, N]
        loss = self.members_loss(chosen, rejected, inputs["margin"], inputs.get(WEIGHT_COLUMN))
        if model.training:
            metrics = pair_metrics(chosen.mean(1), rejected.mean(1))
            metrics["member_accuracy"] = (chosen.detach() > rejected.detach()).float().mean().item()
            self.record(metrics)
        if return_outputs:
            return loss, {"chosen": chosen, "rejected": rejected}
        return loss

    def members_loss(self, chosen, rejected, margin, weight) -> torch.Tensor:
        """The members' mean loss from their outputs [B, N], each pair weighted by its count in each member's
        resample (``weight`` [B, N]; None: every pair once, as in evaluation)."""
        diff = chosen - rejected
        if self.margin_mode == "subtract":
            diff = diff - margin.to(diff.dtype)[:, None]
        per = -F.logsigmoid(diff)
        weight = torch.ones_like(per) if weight is None else weight.to(per.dtype)
        loss = (weight * per).sum(0).div(per.shape[0]).mean()
        if self.center_rewards_coefficient:
            loss = loss + self.center_rewards_coefficient * torch.mean((chosen + rejected) ** 2)
        return loss

    def first_rows_loss(self, out: dict, inputs: dict, rows: int) -> torch.Tensor:
        weight = inputs.get(WEIGHT_COLUMN)
        return self.members_loss(
            out["chosen"][:rows],
            out["rejected"][:rows],
            inputs["margin"][:rows],
            None if weight is None else weight[:rows],
        )

    def eval_outputs(self, out, inputs):
        c, r = out["chosen"].float(), out["rejected"].float()
        # columns: mean c, r (the saved reward), then the N members' chosen, then their rejected
        logits = torch.cat([c.mean(1, keepdim=True), r.mean(1, keepdim=True), c, r], dim=1)
        return logits, torch.zeros(logits.shape[0], device=logits.device)

    @staticmethod
    def served_rewards(predictions: np.ndarray) -> np.ndarray:
        return np.asarray(predictions)[:, :2]


def ensemble_metrics(eval_pred) -> dict[str, float]:
    p = np.asarray(eval_pred.predictions, dtype=np.float64)
    n = (p.shape[1] - 2) // 2
    c, r = p[:, 2 : 2 + n], p[:, 2 + n :]
    margin_std = (c - r).std(axis=1)
    correct = p[:, 0] > p[:, 1]
    return {
        "accuracy": float(correct.mean()),
        "chosen_rewards": float(p[:, 0].mean()),
        "rejected_rewards": float(p[:, 1].mean()),
        "reward_margin": float((p[:, 0] - p[:, 1]).mean()),
        "member_accuracy": float((c > r).mean()),
        "reward_std": float(ensemble_std(torch.from_numpy(np.concatenate([c, r]).T)).mean()),
        "margin_std": float(margin_std.mean()),
        # disagreement where the mean misranks vs where it is right (uncertainty that means something)
        "margin_std_wrong": float(margin_std[~correct].mean()) if (~correct).any() else float("nan"),
        "margin_std_right": float(margin_std[correct].mean()) if correct.any() else float("nan"),
    }


def build_head_trainer(spec: Any, pair_collator: Any, tokenizer: Any, common: dict[str, Any]) -> BradleyTerryTrainer:
    """The trainer for a Bradley-Terry spec with length_debias or ensemble (rmspec.train.factory)."""
    approach = spec.approach
    common = dict(common)
    shared = dict(margin_mode=approach.margin_mode, center_rewards_coefficient=approach.center_rewards_coefficient)
    if approach.length_debias is not None:
        return OdinTrainer(
            odin=approach.length_debias, data_collator=HeadCollator(pair_collator, tokenizer), **shared, **common
        )
    members = approach.ensemble.members
    common["train_dataset"] = with_member_weights(
        common["train_dataset"], members, spec.training.seed, approach.ensemble.bootstrap
    )
    return EnsembleTrainer(members=members, data_collator=HeadCollator(pair_collator), **shared, **common)
