"""Ensembles of reward heads at scoring time: the members beside a saved model, and their spread.

A model trained with `approach.ensemble` (rmspec.train.heads) is saved as a plain one-output
classifier whose head is the members' mean (what plain transformers, vLLM and TGI load), with the
members in `ensemble_heads.safetensors` (`weight` [N, hidden], `bias` [N] when the head has one).
rmspec's loader swaps the head for `EnsembleHead`, whose outputs are [reward, member_1..member_N]:
output 0 is the members' reduction (mean by default: the saved head's value up to float rounding;
min or mean - coef * std when serving asks), so every caller that reads output 0 (score, serve,
eval, annotate) gets the reduced reward, and the members are there for `reward_std`.

torch is imported inside the functions (the class is built on first use).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError

ENSEMBLE_FILE = "ensemble_heads.safetensors"  # the name rmspec.train.heads saves under
HEAD_NAMES = ("score", "classifier")
# Coste et al. 2023: the mean, the worst case and an uncertainty-penalised reward (rmspec subtracts
# coef * std, on the reward's scale, where they subtract lambda * variance).
REDUCTIONS = ("mean", "min", "mean_minus_std")


def ensemble_std(rewards: Any) -> Any:
    """[members, batch] -> [batch], the members' population standard deviation (correction 0: the
    members are the whole ensemble), the number `reward_std` reports."""
    return rewards.float().std(dim=0, correction=0)


def reduce_ensemble(rewards: Any, how: str = "mean", coef: float = 1.0) -> Any:
    """[members, batch] -> [batch]: mean, min, or mean - coef * std over the members."""
    if rewards.dim() != 2:
        raise ValueError(f"ensemble rewards must be [members, batch], got shape {tuple(rewards.shape)}")
    if how == "mean":
        return rewards.mean(dim=0)
    if how == "min":
        return rewards.min(dim=0).values
    if how == "mean_minus_std":
        return rewards.mean(dim=0) - coef * ensemble_std(rewards).to(rewards.dtype)
    raise ValueError(f"ensemble reduction must be one of {REDUCTIONS}, got {how!r}")


def member_std(values: Sequence[float]) -> float | None:
    """The members' population std from one output row [reward, m_1..m_N]; None without members."""
    members = list(values[1:])
    if len(members) < 2:
        return None
    mean = sum(members) / len(members)
    return math.sqrt(sum((m - mean) ** 2 for m in members) / len(members))


def _head_class():
    import torch
    from torch import nn

    class EnsembleHead(nn.Module):
        """N linear heads in one layer; forward gives [..., 1 + N]: the reduction, then the members."""

        def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
            super().__init__()
            self.members = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
            with torch.no_grad():
                self.members.weight.copy_(weight)
                if bias is not None:
                    self.members.bias.copy_(bias)
            self.reduce, self.coef = "mean", 1.0

        def set_reduce(self, how: str, coef: float = 1.0) -> None:
            if how not in REDUCTIONS:
                raise ValueError(f"ensemble reduction must be one of {REDUCTIONS}, got {how!r}")
            self.reduce, self.coef = how, coef

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.members(x)  # [..., N]
            flat = out.reshape(-1, out.shape[-1]).transpose(0, 1)  # [N, rows]
            reduced = reduce_ensemble(flat.float(), self.reduce, self.coef).to(out.dtype)
            return torch.cat([reduced.reshape(*out.shape[:-1], 1), out], dim=-1)

    return EnsembleHead


def has_ensemble(model_dir: str | Path) -> bool:
    return (Path(model_dir) / ENSEMBLE_FILE).is_file()


def attach_ensemble(model: Any, model_dir: str | Path) -> int:
    """Swap the saved mean head for the members when the folder holds them; the member count (0: none).

    The saved head must be the members' mean (checked: a folder whose members do not match its head
    was edited by hand or mixed up, and its rewards would differ between transformers and rmspec)."""
    path = Path(model_dir) / ENSEMBLE_FILE
    if not path.is_file():
        return 0
    import torch
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
        weight = tensors["weight"]
    except Exception as exc:  # a damaged or foreign file: say which
        raise RmspecError(
            f"{path} is not an rmspec ensemble file ({type(exc).__name__}: {exc})",
            f"remove {ENSEMBLE_FILE} to score with the saved head alone",
        ) from None
    name = next((n for n in HEAD_NAMES if isinstance(getattr(model, n, None), torch.nn.Linear)), None)
    if name is None:
        raise RmspecError(
            f"{model_dir} holds {ENSEMBLE_FILE} but the model has no linear score head",
            f"remove {ENSEMBLE_FILE} to score with the model as it is",
        )
    head = getattr(model, name)
    bias = tensors.get("bias")
    if (
        weight.dim() != 2
        or weight.shape[1] != head.in_features
        or head.out_features != 1
        or (bias is None) != (head.bias is None)
    ):
        raise RmspecError(
            f"{path}: members of shape {tuple(weight.shape)} do not fit the score head "
            f"({head.in_features} -> {head.out_features})",
            f"remove {ENSEMBLE_FILE} or re-save the run",
        )
    mean = weight.mean(0, keepdim=True).to(head.weight.dtype)
    tolerance = 1e-3 if head.weight.dtype != torch.float32 else 1e-5
    if not torch.allclose(mean, head.weight.detach().cpu(), atol=tolerance):
        raise RmspecError(
            f"{path}: the members' mean is not the saved score head",
            "the folder was changed after training; re-save the run or remove the file",
        )
    members = _head_class()(weight.to(head.weight.dtype), None if bias is None else bias.to(head.weight.dtype))
    members.to(head.weight.device)
    setattr(model, name, members)
    return int(weight.shape[0])


def ensemble_head(model: Any) -> Any:
    """The model's EnsembleHead, or None."""
    for name in HEAD_NAMES:
        head = getattr(model, name, None)
        if head is not None and hasattr(head, "set_reduce"):
            return head
    return None


def set_reduce(model: Any, how: str, coef: float = 1.0) -> None:
    """What output 0 is: mean, min or mean_minus_std of the members (serve --ensemble-reduce)."""
    head = ensemble_head(model)
    if head is None:
        if how == "mean":
            return
        raise RmspecError(
            f"--ensemble-reduce {how}: this model is not an ensemble (no {ENSEMBLE_FILE})",
            "train with approach.ensemble: {members: N}, or leave out --ensemble-reduce",
        )
    head.set_reduce(how, coef)


def pair_members(
    engine: Any, prompts: Sequence[Any], first: Sequence[str], second: Sequence[str]
) -> tuple[list[list[float]], list[list[float]]]:
    """Every member's reward of both sides of each pair (one pass; prompts computed once where the
    engine allows): ([n][N], [n][N])."""
    encoded = engine.encode([(p, r) for p, a, b in zip(prompts, first, second) for r in (a, b)])
    groups = [encoded[i : i + 2] for i in range(0, len(encoded), 2)]
    outputs = engine.grouped_outputs(groups)
    return [g[0][1:] for g in outputs], [g[1][1:] for g in outputs]
