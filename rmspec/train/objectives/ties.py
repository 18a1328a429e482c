"""The Davidson (1970) ties model for Bradley-Terry, and how well its tie probabilities are calibrated.

Davidson, "On extending the Bradley-Terry model to accommodate ties in paired comparison experiments",
JASA 65:317-328. With p_i = exp(r_i) and a tie parameter nu >= 0:

    P(i > j) = p_i / (p_i + p_j + nu * sqrt(p_i p_j))
    P(tie)   = nu * sqrt(p_i p_j) / (p_i + p_j + nu * sqrt(p_i p_j))

Dividing through by sqrt(p_i p_j) = exp((r_i + r_j) / 2) with d = r_i - r_j gives the stable form

    log P(i > j) = d/2 - logsumexp(d/2, -d/2, log nu),   log P(tie) = log nu - logsumexp(d/2, -d/2, log nu)

nu = exp(log_nu); nu = 0 is Bradley-Terry. Whether nu is learned or fixed is the caller's choice:
`TieParameter(learn=True)` holds log_nu as a trainable parameter (trained with the model by the same
loss), `learn=False` as a fixed buffer.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class TieParameter(nn.Module):
    """nu of the Davidson model, stored as log_nu; learned (a parameter) or fixed (a buffer)."""

    def __init__(self, nu: float = 1.0, learn: bool = True):
        super().__init__()
        if not nu > 0:
            raise ValueError(f"the Davidson tie parameter nu must be > 0, got {nu}")
        value = torch.tensor(math.log(nu))
        if learn:
            self.log_nu = nn.Parameter(value)
        else:
            self.register_buffer("log_nu", value)

    @property
    def nu(self) -> float:
        return math.exp(self.log_nu.item())


def _log_nu(log_nu: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(log_nu, dtype=like.dtype, device=like.device).expand_as(like)


def davidson_log_probs(
    chosen: torch.Tensor, rejected: torch.Tensor, log_nu: torch.Tensor | float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """log P(chosen wins), log P(rejected wins), log P(tie), each [batch]."""
    half = (chosen.float() - rejected.float()) / 2
    ln = _log_nu(log_nu, half)
    norm = torch.logsumexp(torch.stack([half, -half, ln]), dim=0)
    return half - norm, -half - norm, ln - norm


def davidson_loss(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    tie: torch.Tensor,
    log_nu: torch.Tensor | float,
    center_coefficient: float | None = None,
) -> torch.Tensor:
    """Mean negative log-likelihood: -log P(tie) on rows where `tie` is True, -log P(chosen wins)
    elsewhere (the order of chosen and rejected does not matter on tie rows). Centering as in
    `bradley_terry_loss`."""
    win, _, tied = davidson_log_probs(chosen, rejected, log_nu)
    loss = -torch.where(tie.bool(), tied, win).mean()
    if center_coefficient:
        loss = loss + center_coefficient * torch.mean((chosen + rejected) ** 2)
    return loss


def tie_calibration(
    chosen: torch.Tensor, rejected: torch.Tensor, tie: torch.Tensor, log_nu: torch.Tensor | float
) -> dict[str, float]:
    """Predicted tie probability against the observed ties.

    - tie_rate / mean_p_tie: the observed share of tie rows and the mean predicted P(tie); calibrated
      when they agree;
    - p_tie_on_ties / p_tie_on_non_ties: mean P(tie) on each kind of row; the gap is how well P(tie)
      tells ties apart (NaN when the batch has none of that kind);
    - tie_brier: mean (P(tie) - 1[tie])^2, lower is better;
    - nu: the tie parameter.
    """
    with torch.no_grad():
        _, _, tied = davidson_log_probs(chosen, rejected, log_nu)
        p_tie = tied.exp()
        is_tie = tie.bool()
        target = is_tie.float()

        def mean_where(sel: torch.Tensor) -> float:
            return p_tie[sel].mean().item() if sel.any() else float("nan")

        return {
            "tie_rate": target.mean().item(),
            "mean_p_tie": p_tie.mean().item(),
            "p_tie_on_ties": mean_where(is_tie),
            "p_tie_on_non_ties": mean_where(~is_tie),
            "tie_brier": ((p_tie - target) ** 2).mean().item(),
            "nu": math.exp(float(torch.as_tensor(log_nu).item())),
        }
