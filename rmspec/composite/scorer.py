"""The composite as a scorer: components built once, rows scored by route, combined, failures
counted. What `load_scorer(RUN)` returns for a composite run (kind `composite`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from rmspec.composite.combine import RowReward, combine_row, route_components
from rmspec.composite.components import Component, build
from rmspec.composite.components.context import Context
from rmspec.composite.counts import FailureCounts
from rmspec.composite.outcome import Item, Outcome
from rmspec.composite.reward_file import read_reward_file
from rmspec.errors import RunError
from rmspec.spec.composite import Composite
from rmspec.spec.scorer_kind import ScorerKind


class CompositeScorer:
    """The Scorer surface (rmspec.inference.scorer) with no token interface of its own: `model` and
    `tokenizer` are None and `encode_ids`/`outputs` refuse, so the protocols that need them answer
    a composite with a clear error; it scores rows (`score_items`) and benchmarks (`score_groups`)."""

    kind: Literal[ScorerKind.COMPOSITE] = ScorerKind.COMPOSITE
    can_normalize = False  # the composite's own `normalize` per component is applied inside
    model: Any = None
    tokenizer: Any = None

    def __init__(
        self,
        composite: Composite,
        context: Context,
        *,
        stats: dict[str, Any] | None = None,
        source: Path | None = None,
        batch_size: int = 64,
        fitting: bool = False,
    ):
        self.composite, self.context, self.source = composite, context, source
        self.stats = stats or {}
        missing = [c.name for c in composite.components if c.normalize != "none" and c.name not in self.stats]
        if missing and not fitting:  # `rmspec run` builds it unfitted, fits, then sets `stats`
            raise RunError(
                f"components {', '.join(missing)} normalise with statistics that are not fitted",
                "run `rmspec run SPEC` (it fits them on the training split), or set normalize: none",
            )
        self.components: dict[str, Component] = {c.name: build(c, context) for c in composite.components}
        self.labels = [c.name for c in composite.components]
        self.counts = FailureCounts(self.labels)
        self.batch_size = batch_size
        self.max_length = max(
            (getattr(getattr(m, "engine", None), "max_length", 0) for m in self.components.values()), default=0
        )

    @property
    def needs_reference(self) -> bool:
        return any(c.needs_reference for c in self.components.values())

    def outcomes(self, items: Sequence[Item]) -> list[dict[str, Outcome]]:
        """Each row's component outcomes, a component asked only about the rows its route uses it on."""
        used = [route_components(self.composite, item.route) for item in items]
        out: list[dict[str, Outcome]] = [{} for _ in items]
        for name, component in self.components.items():
            rows = [i for i, names in enumerate(used) if name in names]
            for i, outcome in zip(rows, component.score([items[i] for i in rows]) if rows else []):
                out[i][name] = outcome
        return out

    def score_items(self, items: Sequence[Item]) -> list[RowReward]:
        rewards = [
            combine_row(self.composite, outcomes, item.route, self.stats)
            for item, outcomes in zip(items, self.outcomes(items))
        ]
        for row in rewards:
            self.counts.add({name: row.failures.get(name) for name in row.values}, row.reward is None)
        return rewards

    def score_groups(self, groups: Sequence[tuple[Any, Sequence[str]]]) -> list[list[float]]:
        """Benchmarks: every response of each (prompt, responses) scored with no reference; a row
        whose reward fails (on_failure: error) stops the evaluation, naming the component."""
        items = [Item(prompt, response) for prompt, responses in groups for response in responses]
        rows = self.score_items(items)
        failed = next((r for r in rows if r.reward is None), None)
        if failed is not None:
            raise RunError(
                f"the composite could not score a benchmark row: {failed.error}",
                "benchmark rows carry no reference: give that component on_failure: skip or {value: X}",
            )
        out, pos = [], 0
        for _, responses in groups:
            out.append([float(r.reward) for r in rows[pos : pos + len(responses)]])  # type: ignore[arg-type]
            pos += len(responses)
        return out

    def normalize(self, reward: float) -> float | None:
        return None

    def encode_ids(self, ids: Sequence[int], limit: int | None = None) -> Any:
        raise TypeError("a composite reward scores rows (prompt, response, label), not token ids")

    def outputs(self, encoded: Sequence[Any], batch_size: int | None = None) -> list[Any]:
        raise TypeError("a composite reward scores rows (prompt, response, label), not encoded texts")

    def describe(self) -> dict[str, Any]:
        return {
            "components": {c.name: c.kind for c in self.composite.components},
            "combine": self.composite.combine,
            "gates": [g.component for g in self.composite.gates],
            "route_by": self.composite.route_by,
        }

    def close(self) -> None:
        self.context.close()


def load_composite(
    path: str | Path, *, load_model: Callable[[str], Any] | None = None, math_workers: int = 2
) -> CompositeScorer:
    """The composite a run wrote (RUN or RUN/reward.yaml)."""
    composite, stats, folder = read_reward_file(path)
    context = Context(base_dir=folder, math_workers=math_workers, load_model=load_model)
    return CompositeScorer(composite, context, stats=stats, source=folder)
