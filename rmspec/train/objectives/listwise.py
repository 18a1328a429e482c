"""Plackett-Luce over a ranking of N >= 2 responses per prompt, and the ranking's metrics.

For one prompt with model rewards r_1..r_N and a labelled order pi (best first), Plackett-Luce
(Plackett 1975; Luce 1959) is the sequential softmax

    log P(pi) = sum_{k=1}^{K} [ r_{pi_k} - log sum_{j >= k} exp(r_{pi_j}) ]

with K = N - 1 (the last position's term is 0) or K = top_k. With N = 2 this is log sigmoid(r_c - r_r),
Bradley-Terry.

Ties in the labelled scores: Breslow's rule (Breslow 1974, "Covariance analysis of censored survival
data", Biometrics 30:89-99; the standard tie handling of the Cox partial likelihood, which has the same
sequential-softmax form). Responses with equal scores form one group; the group leaves the ranking
at once, and each member is scored against the same set (the group and everything ranked below it):

    group term = sum_{i in D} r_i - |D| * log sum_{j in D u below} exp(r_j)

so tied responses are never ordered against each other, and with no ties the rule is plain
Plackett-Luce. A group of tied responses at the bottom still contributes (its term is largest when
the tied rewards are equal). With `top_k`, a group contributes when it starts within the first
`top_k` positions of the labelled order.
"""

from __future__ import annotations

import torch

_NEG = -1e9  # stands for log(0) for padded responses; finite, so no inf - inf in the gradient


def plackett_luce_loss(
    rewards: torch.Tensor,
    scores: torch.Tensor,
    mask: torch.Tensor | None = None,
    top_k: int | None = None,
) -> torch.Tensor:
    """Mean over prompts of -log P(labelled order), Breslow's rule for tied scores.

    rewards: [B, N] model rewards; scores: [B, N] labelled scores, higher is better (for ranks with
    1 = best pass `-ranks`); mask: [B, N] bool, False for padding when prompts have fewer than N
    responses. Prompts with fewer than two responses are left out of the mean.
    """
    if rewards.shape != scores.shape or rewards.dim() != 2:
        raise ValueError(
            f"rewards and scores must both be [batch, N]; got {tuple(rewards.shape)} and {tuple(scores.shape)}"
        )
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if mask is None:
        mask = torch.ones_like(rewards, dtype=torch.bool)
    mask = mask.bool()
    rewards = rewards.float()
    n = rewards.shape[1]
    # Sort each prompt's responses by labelled score, best first; padding goes last.
    key = scores.float().masked_fill(~mask, float("-inf"))
    key, order = torch.sort(key, dim=1, descending=True, stable=True)
    valid = mask.gather(1, order)
    r = rewards.gather(1, order).masked_fill(~valid, _NEG)
    # log sum_{j >= k} exp(r_j): a reversed running logsumexp.
    tail_lse = torch.logcumsumexp(r.flip(1), dim=1).flip(1)
    # Each position's tie group starts where its score first appears.
    pos = torch.arange(n, device=r.device).expand_as(r)
    new_group = torch.ones_like(valid)
    new_group[:, 1:] = key[:, 1:] != key[:, :-1]
    start = torch.where(new_group, pos, torch.zeros_like(pos)).cummax(dim=1).values
    terms = r - tail_lse.gather(1, start)
    keep = valid if top_k is None else valid & (start < top_k)
    per_prompt = -(terms * keep).sum(1)
    counted = valid.sum(1) >= 2
    if not counted.any():
        return rewards.sum() * 0.0
    return per_prompt[counted].mean()


def ranking_metrics(rewards: torch.Tensor, scores: torch.Tensor, mask: torch.Tensor | None = None) -> dict[str, float]:
    """Pair accuracy over all ordered pairs with different labelled scores (a tie in rewards counts as
    wrong, as in `pair_metrics`), and Kendall's tau-b per prompt (ties in either ranking handled as in
    scipy.stats.kendalltau), averaged over prompts where it is defined."""
    rewards, scores = rewards.detach().float(), scores.detach().float()
    if mask is None:
        mask = torch.ones_like(rewards, dtype=torch.bool)
    both = mask.bool().unsqueeze(2) & mask.bool().unsqueeze(1)
    ds = torch.sign(scores.unsqueeze(2) - scores.unsqueeze(1))  # [B, N, N]
    dr = torch.sign(rewards.unsqueeze(2) - rewards.unsqueeze(1))
    upper = torch.triu(torch.ones_like(ds, dtype=torch.bool), diagonal=1) & both
    labelled = upper & (ds != 0)
    correct = (labelled & (ds == dr)).sum().item()
    total = labelled.sum().item()
    concordance = ((ds * dr) * upper).sum((1, 2))
    n_s = (upper & (ds != 0)).sum((1, 2)).float()
    n_r = (upper & (dr != 0)).sum((1, 2)).float()
    defined = (n_s > 0) & (n_r > 0)
    tau = concordance[defined] / torch.sqrt(n_s[defined] * n_r[defined])
    return {
        "pair_accuracy": correct / total if total else float("nan"),
        "kendall_tau": tau.mean().item() if defined.any() else float("nan"),
        "ranked_pairs": float(total),
    }
