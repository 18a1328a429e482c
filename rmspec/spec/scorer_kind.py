"""The kinds of scorer a trained model can be: the one vocabulary for "what does this model output".

Light (stdlib only), so the spec side (the benchmark catalogue says which kinds can score a
benchmark) and the heavy side (`rmspec.inference.load_scorer` tags what it loaded) share it.
"""

from __future__ import annotations

from enum import Enum


class ScorerKind(str, Enum):
    """Compares, prints and serialises as its value (`/health` answers "reward"; Python 3.10 has
    no StrEnum)."""

    REWARD = "reward"  # one scalar per text
    POINTWISE = "pointwise"  # one output per attribute
    JUDGE = "judge"  # a generative judge: generates a verdict, has no score head
    PROCESS = "process"  # a process reward model: P(correct) per step
    VISION_REWARD = "vision_reward"  # a score head on a vision-language model: prompts may hold images
    COMPOSITE = "composite"  # rules, judges and models combined by a spec (rmspec.composite): trains nothing

    __str__ = str.__str__

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
