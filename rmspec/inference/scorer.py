"""What every loaded scorer is: its kind, and the surface all kinds share.

`rmspec.inference.engine.load_scorer(MODEL_OR_RUN)` returns a `RewardEngine` (kinds reward,
pointwise, judge) or a `StepEngine` (kind process). Callers dispatch on `scorer.kind`, which
type checkers read as the tag of that union (`RewardEngine.kind` is one of the first three,
`StepEngine.kind` is always PROCESS), never on the class or on which methods it has.

Light: no torch, imports nothing of the engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rmspec.inference.encoding import Encoded


class ScorerKind(str, Enum):
    """Compares, prints and serialises as its value (`/health` answers "reward"; Python 3.10 has
    no StrEnum)."""

    REWARD = "reward"  # one scalar per text
    POINTWISE = "pointwise"  # one output per attribute
    JUDGE = "judge"  # a generative judge: generates a verdict, has no score head
    PROCESS = "process"  # a process reward model: P(correct) per step

    __str__ = str.__str__

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Scorer(Protocol):
    """What `rmspec serve`, `rmspec score` and evaluation use whatever the kind."""

    @property
    def kind(self) -> ScorerKind: ...

    model: Any
    tokenizer: Any
    max_length: int
    batch_size: int
    labels: list[str]

    @property
    def can_normalize(self) -> bool: ...

    def normalize(self, reward: float) -> float | None: ...

    def encode_ids(self, ids: Sequence[int], limit: int | None = None) -> Encoded: ...

    def outputs(self, encoded: Sequence[Encoded], batch_size: int | None = None) -> Sequence[Any]: ...
