"""The language-model loss on the chosen response's tokens, GRM's regularizer for a reward model.

GRM (Yang et al. 2024, "Regularizing Hidden States Enables Learning Generalizable Reward Model for
LLMs", arXiv 2406.10216; reward-bench PR #151): L = L_BT + weight * L_SFT, with L_SFT the mean
next-token negative log-likelihood of the chosen response given its prompt, from the kept LM head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def response_labels(input_ids: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Labels aligned with `input_ids` (Hugging Face's convention): the token id on the chosen
    response's tokens, -100 on the prompt, padding and anything else."""
    return input_ids.masked_fill(~response_mask.bool(), IGNORE_INDEX)


def chosen_lm_loss(logits: torch.Tensor, labels: torch.Tensor, shift: bool = True) -> torch.Tensor:
    """Mean cross-entropy over the labelled tokens (labels != -100).

    logits: [B, T, V]; labels: [B, T]. With `shift` (labels aligned with the input, as
    `response_labels` builds them) position t's logits predict label t + 1, as in a causal LM. A
    packed row that puts another response between the prompt and the chosen one must build its
    targets already aligned (the label at the position whose hidden state predicts it) and pass
    shift=False. Only the labelled positions go through the softmax, so the memory is
    O(labelled tokens x V), not O(B x T x V).
    """
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    keep = labels != IGNORE_INDEX
    if not keep.any():
        return logits.sum() * 0.0
    return F.cross_entropy(logits[keep].float(), labels[keep])


def sft_regularized_loss(preference_loss: torch.Tensor, lm_loss: torch.Tensor, weight: float) -> torch.Tensor:
    """L_preference + weight * L_SFT."""
    return preference_loss + weight * lm_loss
