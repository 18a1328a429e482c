"""Graded preferences: a margin subtracted inside Bradley-Terry, or scaling its loss.

- `subtract` (Llama 2, Touvron et al. 2023, sec. 3.2.2; TRL's `margin` column; rmspec's
  `use_margin: true`): mean of -log sigmoid(r_c - r_r - m).
- `scale` (HelpSteer2-Preference's scaled Bradley-Terry, Wang et al. 2024, arXiv 2410.01257;
  INF-ORM-Llama3.1-70B with the labelled strengths 1/2/3 remapped to 1/3/10): mean of
  -alpha * d * log sigmoid(r_c - r_r), d the (remapped) strength of the preference. The mean is over
  rows, not normalised by sum(d), so the loss grows with the strengths as the formula says.
- `none`: plain Bradley-Terry; a margin, if given, is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from rmspec.train.losses import bradley_terry_loss

MARGIN_MODES = ("none", "subtract", "scale")
INF_ORM_MARGIN_MAP = {1: 1.0, 2: 3.0, 3: 10.0}


def margin_bradley_terry_loss(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    margin: torch.Tensor | None = None,
    mode: str = "subtract",
    alpha: float = 1.0,
    center_coefficient: float | None = None,
) -> torch.Tensor:
    """Bradley-Terry with a margin used as `mode` says (see the module docstring); centering as in
    `bradley_terry_loss`."""
    if mode not in MARGIN_MODES:
        raise ValueError(f"margin mode must be one of {MARGIN_MODES}, got {mode!r}")
    if mode == "scale" and margin is None:
        raise ValueError("margin mode 'scale' needs a margin (the preference strength) per row")
    if mode == "none" or margin is None:
        return bradley_terry_loss(chosen, rejected, None, center_coefficient)
    if mode == "subtract":
        return bradley_terry_loss(chosen, rejected, margin, center_coefficient)
    loss = -(alpha * margin.to(chosen.dtype) * F.logsigmoid(chosen - rejected)).mean()
    if center_coefficient:
        loss = loss + center_coefficient * torch.mean((chosen + rejected) ** 2)
    return loss


def remap_margin(values, mapping: Mapping):
    """Replace each labelled strength by mapping[strength] (INF-ORM: {1: 1, 2: 3, 3: 10}).

    `values` is a number, a list of numbers or a tensor; keys are compared as floats, so a YAML map
    with keys 1, 1.0 or "1" works. A strength missing from the map is an error naming it: silently
    keeping it would train on a scale the user did not ask for."""
    table = {}
    for key, value in mapping.items():
        try:
            table[float(key)] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"margin_map entries must be numbers, got {key!r}: {value!r}") from None

    def one(v: float) -> float:
        try:
            return table[float(v)]
        except KeyError:
            raise ValueError(f"margin {v!r} is not in margin_map (keys: {sorted(table)})") from None

    if isinstance(values, torch.Tensor):
        return torch.tensor(
            [one(v) for v in values.flatten().tolist()],
            dtype=values.dtype if values.is_floating_point() else torch.float32,
            device=values.device,
        ).view(values.shape)
    if isinstance(values, (list, tuple)):
        return [one(v) for v in values]
    return one(values)
