"""What the recipes add to Bradley-Terry training (issue 21): the Davidson tie parameter, the LM
head of the SFT regularizer and its term (on two sequences per pair, or read in the prompt-once row:
``packed_pair_sft``), and the metrics that go with ties.

Both extras are modules attached to the reward model (`rmspec_tie`, `rmspec_lm_head`) so the
Trainer's optimizer, checkpoints and device placement see them; the final model is saved without
them (BradleyTerryTrainer.save_model), a plain sequence classifier for every client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rmspec.train.objectives.sft import IGNORE_INDEX, chosen_lm_loss
from rmspec.train.objectives.ties import TieParameter, tie_calibration
from rmspec.train.packing import SFT_LABELS, SFT_PAIRS, SFT_POSITIONS, packed_rows

TIE_MODULE, LM_HEAD_MODULE = "rmspec_tie", "rmspec_lm_head"
EXTRA_MODULES = (TIE_MODULE, LM_HEAD_MODULE)


def attach_tie(model: nn.Module, nu: float | None) -> TieParameter:
    """nu fixed when given, else learned from 1.0 (log nu = 0)."""
    tie = TieParameter(nu=nu if nu is not None else 1.0, learn=nu is None)
    model.add_module(TIE_MODULE, tie)
    return tie


def attach_lm_head(model: nn.Module, model_path: str, vocab_size: int, **load_kwargs: Any) -> str:
    """The base model's LM head, kept beside the score head for the SFT term; returns what was taken.

    Tied embeddings (most small decoders): the head is the input embedding matrix itself, as in the
    causal LM. Otherwise the causal LM's own output layer is loaded and copied."""
    embeddings = model.get_input_embeddings()
    config = model.config
    if getattr(config.get_text_config(), "tie_word_embeddings", False):
        head = nn.Linear(embeddings.weight.shape[1], embeddings.weight.shape[0], bias=False)
        head.weight = embeddings.weight
        how = "LM head tied to the input embeddings (as the base model)"
    else:
        from transformers import AutoModelForCausalLM

        causal = AutoModelForCausalLM.from_pretrained(model_path, **load_kwargs)
        if causal.get_output_embeddings().weight.shape[0] != vocab_size:
            causal.resize_token_embeddings(vocab_size, mean_resizing=True)
        source = causal.get_output_embeddings()
        head = nn.Linear(source.weight.shape[1], source.weight.shape[0], bias=source.bias is not None)
        head.load_state_dict(source.state_dict())
        head.to(embeddings.weight.dtype)
        del causal
        how = f"LM head loaded from {model_path}'s causal LM"
    model.add_module(LM_HEAD_MODULE, head)
    return how


def chosen_response_labels(chosen: torch.Tensor, rejected: torch.Tensor, chosen_mask: torch.Tensor) -> torch.Tensor:
    """Labels for the chosen sequences: the token ids after the longest prefix shared with the
    rejected sequence (the prompt and its template, which both sides carry), -100 elsewhere.

    A response that begins with the same words as the rejected one loses those leading tokens from
    the LM term: the price of reading the boundary from the pair instead of storing it."""
    t = min(chosen.shape[1], rejected.shape[1])
    same = (chosen[:, :t] == rejected[:, :t]).long().cumprod(dim=1)
    shared = same.sum(dim=1)  # length of the common prefix
    positions = torch.arange(chosen.shape[1], device=chosen.device).unsqueeze(0)
    keep = (positions >= shared.unsqueeze(1)) & chosen_mask.bool()
    return chosen.masked_fill(~keep, IGNORE_INDEX)


@dataclass
class PairNLL:
    """The SFT term by pair: each pair's summed NLL and its number of target tokens (whole on every rank of a
    split group), so the term of the batch's first rows can be taken alone (an evaluation batch that ends in
    repeats: rmspec.train.base_trainer.ScoreTrainer.first_rows_loss)."""

    sums: torch.Tensor  # [pairs]
    tokens: torch.Tensor  # [pairs]

    def mean(self, rows: int | None = None) -> torch.Tensor:
        """The mean NLL over the target tokens of the first ``rows`` pairs (all by default)."""
        return self.sums[:rows].sum() / max(int(self.tokens[:rows].sum()), 1)


def packed_pair_sft(
    model: Any, inputs: dict[str, torch.Tensor], lm_head: nn.Module, split: Any = None
) -> tuple[torch.Tensor, torch.Tensor, PairNLL]:
    """(chosen rewards, rejected rewards, the SFT term by pair) of a packed pair batch with its targets
    (rmspec.train.packing.packed_sft_targets), from one forward: the score head at the read points, the LM head at the targets'
    hidden states only. Split over the context-parallel group ``split``, each rank takes the targets in its
    columns and the pairs' sums are summed over the group, the one-process sums on every rank; each rank's share
    sends its gradient back N times over (into the LM head's weights as into the split forward), as the split
    forward's outputs do (context_parallel_run.sum_over_group)."""
    from rmspec.inference.packed_forward import StatesAt, packed_head_outputs

    request = StatesAt(inputs[SFT_POSITIONS])
    if split is None:
        scores = packed_head_outputs(model, packed_rows(inputs), request)[:, 0]
    else:
        from rmspec.train.context_parallel_run import split_head_outputs

        scores = split_head_outputs(model, inputs, split, request)[:, 0]
    assert request.states is not None and request.held is not None  # filled by the forward
    held = request.held.to(scores.device)
    nll = F.cross_entropy(lm_head(request.states).float(), inputs[SFT_LABELS][held], reduction="none")
    owners, pairs = inputs[SFT_PAIRS], scores.shape[0] // 2
    sums = torch.zeros(pairs, dtype=nll.dtype, device=nll.device).index_add(0, owners[held], nll)
    if split is not None:
        from rmspec.train.context_parallel import sum_over_ranks
        from rmspec.train.context_parallel_run import sum_over_group

        sums = sum_over_ranks(sum_over_group(sums, split.degree), split.group)
    return scores[0::2], scores[1::2], PairNLL(sums, torch.bincount(owners, minlength=pairs))


def sft_term(lm_head: nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token NLL of the labelled tokens; only those positions go through the LM head."""
    h, lab = hidden[:, :-1], labels[:, 1:]
    keep = lab != IGNORE_INDEX
    if not keep.any():
        return hidden.sum() * 0.0
    logits = lm_head(h[keep])
    return chosen_lm_loss(logits.unsqueeze(0), lab[keep].unsqueeze(0), shift=False)


def davidson_pair_metrics(tie: TieParameter):
    """compute_metrics for Davidson runs: accuracy on the rows that are not ties, and the tie
    calibration (predicted P(tie) against the annotated ties) at the learned or fixed nu."""

    def metrics(eval_pred) -> dict[str, float]:
        p = np.asarray(eval_pred.predictions, dtype=np.float64)
        chosen, rejected, is_tie = p[:, 0], p[:, 1], p[:, 2] > 0.5
        out = {
            "accuracy": float((chosen[~is_tie] > rejected[~is_tie]).mean()) if (~is_tie).any() else float("nan"),
            "chosen_rewards": float(chosen.mean()),
            "rejected_rewards": float(rejected.mean()),
            "reward_margin": float((chosen[~is_tie] - rejected[~is_tie]).mean()) if (~is_tie).any() else float("nan"),
        }
        cal = tie_calibration(
            torch.from_numpy(chosen), torch.from_numpy(rejected), torch.from_numpy(is_tie), math.log(tie.nu)
        )
        out.update({("tie_nu" if k == "nu" else k): v for k, v in cal.items()})
        return out

    return metrics
