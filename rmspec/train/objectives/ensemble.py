"""Ensembles of reward heads: reducing the members' rewards, and each member's bootstrap resample.

Coste et al. 2023, "Reward Model Ensembles Help Mitigate Overoptimization" (arXiv 2310.02743): the
mean, the worst case (min over members) and an uncertainty-penalised reward resist reward hacking.
Their uncertainty-weighted form subtracts lambda * variance; rmspec's `mean_minus_std` subtracts
coef * std, which stays on the reward's scale. The std is the population std over the members
(correction 0: the members are the whole ensemble), the same number `reward_std` reports.
"""

from __future__ import annotations

import numpy as np
import torch

# The reductions live with the scorer that serves them (inference may not import train); the same
# functions train and score.
from rmspec.inference.ensemble import REDUCTIONS, ensemble_std, reduce_ensemble  # noqa: E402,F401


def bootstrap_indices(n_rows: int, members: int, seed: int, bootstrap: bool = True) -> torch.Tensor:
    """[members, n_rows] row indices: each member's resample of the training rows, drawn with
    replacement (Efron's bootstrap; about 63% distinct rows each), or every row once when `bootstrap`
    is off (the members then differ only by their initialisation). Member m's draw depends only on
    (seed, m), so adding members leaves the earlier members' resamples unchanged."""
    if n_rows < 1 or members < 1:
        raise ValueError(f"need at least one row and one member, got n_rows={n_rows}, members={members}")
    if not bootstrap:
        return torch.arange(n_rows).expand(members, n_rows).clone()
    draws = [np.random.default_rng([seed, m]).integers(0, n_rows, size=n_rows) for m in range(members)]
    return torch.from_numpy(np.stack(draws)).long()
