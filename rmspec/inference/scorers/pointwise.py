"""The pointwise kind: a score head with one output per attribute (helpfulness, correctness...).

Loaded as a reward model (`RewardEngine.from_parts` tags it pointwise when the run's approach
saved one or the head has several outputs); scored into one column per attribute. Its outputs
are not normalized when served, and each text is computed whole (no shared prompt).
"""

from __future__ import annotations

from typing import Any

from rmspec.inference.scorers.base import Found
from rmspec.inference.scorers.reward import RewardKind
from rmspec.inference.scorers.shapes import PAIRS, Shape
from rmspec.spec.scorer_kind import ScorerKind


class PointwiseKind(RewardKind):
    kind = ScorerKind.POINTWISE
    description = "a score head with one output per attribute"
    normalizes = False
    shares_prompt = False
    one_score = False
    text_reward = False  # one output per attribute, not one reward

    def claims(self, found: Found) -> bool:
        return found.declared == ScorerKind.POINTWISE

    def columns(self, engine: Any, shape: Shape, outs: list[list[float]], enc: list[Any]) -> dict[str, Any]:
        """One column per attribute (a pair: `<attribute>_chosen`, `<attribute>_rejected`)."""
        truncated = any(e.truncated for e in enc)
        if shape.kind == PAIRS:
            cols = {
                f"{name}_{side}": o[j]
                for side, o in zip(("chosen", "rejected"), outs)
                for j, name in enumerate(engine.labels)
            }
        else:
            cols = {name: outs[0][j] for j, name in enumerate(engine.labels)}
        return {**cols, "truncated": truncated}


KIND = PointwiseKind()
