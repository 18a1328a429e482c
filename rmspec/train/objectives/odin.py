"""ODIN's length debiasing: a quality head and a length head on the same features.

Chen et al. 2024, "ODIN: Disentangled Reward Mitigates Hacking in RLHF", ICML 2024, arXiv 2402.07319;
the terms and their defaults follow the authors' code (github.com/Lichang-Chen/ODIN,
training/utils/model/two_head_rw.py and training/step2-reward-modeling/main.py, scripts/train_rm.sh):

- the reward trained by Bradley-Terry is the sum of the heads, r = r_Q + r_L;
- length loss, the length head made to follow length: 1 - rho(r_L, length) (the paper writes -rho; the
  constant does not change the gradient, and 1 - rho reads as 0 when perfect);
- quality loss, the quality head made blind to length: |rho(r_Q, length)|;
- orthogonality loss on the two heads' weight vectors: |cos(w_Q, w_L)|, the authors' |W_Q^T W_L| on
  weights they normalise to unit length (after centring each, with their `normalized_proj`, which
  `normalized_head_weight` reproduces for a model that wants it);
- total: L_BT(r_Q + r_L) + lambda_length * L_len + lambda_quality * L_Q + lambda_ortho * L_O, all
  lambdas 1.0 in the authors' script. rho is Pearson's correlation over the chosen and rejected
  responses of the batch together (the authors gather it across GPUs: their global batch).
- only r_Q is served.

The authors' code also adds |rho(r_Q + r_L, length)| with the same weight; it is not in the paper and
it pulls against the length head's purpose, so it is left out here. "length" is the caller's choice of
token count: the authors use the whole sequence's (prompt and response); the response's alone is the
natural choice when chosen and rejected share a prompt.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rmspec.train.losses import bradley_terry_loss


def pearson(x: torch.Tensor, y: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Pearson's correlation of two 1-D tensors, differentiable; 0 when either is constant."""
    x, y = x.float().flatten(), y.float().flatten()
    xc, yc = x - x.mean(), y - y.mean()
    denom = torch.sqrt((xc * xc).sum() * (yc * yc).sum())
    return (xc * yc).sum() / denom.clamp_min(eps)


def normalized_head_weight(weight: torch.Tensor) -> torch.Tensor:
    """The authors' `normalized_proj`: each head's weight row centred and scaled to unit norm."""
    w = weight - weight.mean(dim=-1, keepdim=True)
    return w / w.norm(dim=-1, keepdim=True).clamp_min(1e-8)


def orthogonality_loss(w_quality: torch.Tensor, w_length: torch.Tensor) -> torch.Tensor:
    """|cos(w_Q, w_L)| of the two heads' weight vectors."""
    return F.cosine_similarity(w_quality.flatten().float(), w_length.flatten().float(), dim=0, eps=1e-8).abs()


def odin_loss(
    quality_chosen: torch.Tensor,
    quality_rejected: torch.Tensor,
    length_chosen: torch.Tensor,
    length_rejected: torch.Tensor,
    len_chosen: torch.Tensor,
    len_rejected: torch.Tensor,
    w_quality: torch.Tensor,
    w_length: torch.Tensor,
    lambda_length: float = 1.0,
    lambda_quality: float = 1.0,
    lambda_ortho: float = 1.0,
    margin: torch.Tensor | None = None,
    center_coefficient: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """ODIN's total loss and its terms (see the module docstring).

    quality_*/length_*: [B] the two heads' outputs for chosen and rejected; len_*: [B] token counts;
    w_quality/w_length: the heads' weight vectors. margin/centering go to the Bradley-Terry term on
    the summed reward, as in `bradley_terry_loss`.
    """
    bt = bradley_terry_loss(
        quality_chosen + length_chosen, quality_rejected + length_rejected, margin, center_coefficient
    )
    lengths = torch.cat([len_chosen, len_rejected]).float()
    rho_length = pearson(torch.cat([length_chosen, length_rejected]), lengths)
    rho_quality = pearson(torch.cat([quality_chosen, quality_rejected]), lengths)
    length_term = 1 - rho_length
    quality_term = rho_quality.abs()
    ortho = orthogonality_loss(w_quality, w_length)
    total = bt + lambda_length * length_term + lambda_quality * quality_term + lambda_ortho * ortho
    return total, {
        "bt_loss": bt.item(),
        "length_head_corr": rho_length.item(),
        "quality_head_corr": rho_quality.item(),
        "ortho_loss": ortho.item(),
    }
