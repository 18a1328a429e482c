"""What every loaded scorer is: the surface all kinds share.

`rmspec.inference.engine.load_scorer(MODEL_OR_RUN)` returns a `RewardEngine` (kinds reward,
pointwise), a `JudgeEngine` (judge), a `StepEngine` (process) or a `CompositeScorer` (composite).
Each carries its kind's name in `kind`; callers ask that kind what to do,
`rmspec.inference.scorers.of(scorer)`, and never compare `kind` or test the class.

Light: no torch, imports nothing of the engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rmspec.spec.scorer_kind import ScorerKind as ScorerKind  # re-exported: callers take it from here

if TYPE_CHECKING:
    from rmspec.inference.encoding import Encoded


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
