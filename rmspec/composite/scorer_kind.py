"""The composite kind: rules, judges and models combined by a composite spec (rmspec.composite);
it trains nothing, and its scorer is `rmspec.composite.scorer.CompositeScorer`. It lives with the
composite, above rmspec.inference, and the scorer registry (rmspec.inference.scorers) names it by
path: inference imports nothing of the composite.

`rmspec score RUN FILE` for a composite run: each row's reward, one column per component
(its raw value, null where it failed or its route left it out) and `<name>_error` (the failure
reason, or null). A row whose reward cannot be given (a component failed under on_failure: error)
goes to the rejects file with the reason `component_failed` and which component failed why.
`rmspec serve` answers /get_reward with prompts and labels (rmspec.serve.composite).
"""

from __future__ import annotations

from typing import Any

from rmspec.composite.combine import RowReward
from rmspec.composite.rows import item_from_row
from rmspec.composite.scorer import CompositeScorer
from rmspec.inference.scorers.base import Found, Rejected, ScorerType
from rmspec.inference.scorers.shapes import Shape
from rmspec.spec.scorer_kind import ScorerKind

COMPOSITE = "composite"


def composite_shape(scorer: CompositeScorer) -> Shape:
    c = scorer.composite
    columns = {"prompt": c.columns.prompt, "response": c.columns.response, "label": c.columns.label}
    if c.route_by is not None:
        columns["route"] = c.route_by
    return Shape(COMPOSITE, columns)


def columns(scorer: CompositeScorer, scored: RowReward) -> dict[str, Any]:
    out: dict[str, Any] = {"reward": scored.reward}
    for name in scorer.labels:
        out[name] = scored.values.get(name)
        out[f"{name}_error"] = scored.failures.get(name)
    if scorer.composite.gates:
        out["gate"] = scored.gate  # the gate that set the floor, or null
    return out


class CompositeKind(ScorerType):
    kind = ScorerKind.COMPOSITE
    description = "rules, judges and models combined by a spec: trains nothing"
    scores_rows = True

    def claims(self, found: Found) -> bool:
        from rmspec.composite.reward_file import is_composite

        return is_composite(found.given)

    def load(
        self, found: Found, *, dtype: str, device: str | None, batch_size: int | None, step_separator: str | None
    ) -> CompositeScorer:
        """The composite a run wrote, its model components loaded as any other scorer."""
        from rmspec.composite.scorer import load_composite
        from rmspec.inference import scorers

        return load_composite(
            found.given, load_model=lambda path: scorers.load(path, dtype=dtype, device=device, batch_size=batch_size)
        )

    def shape(self, engine: Any, columns: list[str], named: dict[str, str]) -> Shape:
        return composite_shape(engine)

    def item(self, engine: Any, row: dict[str, Any], shape: Shape) -> Any:
        item = item_from_row(row, engine.composite)
        return Rejected(item, "missing_response") if isinstance(item, str) else item

    def score(
        self, engine: Any, shape: Shape, items: list[Any], batch_size: int
    ) -> tuple[list[dict[str, Any] | Rejected], tuple[int, int]]:
        out: list[dict[str, Any] | Rejected] = []
        for scored in engine.score_items(items):
            cols = columns(engine, scored)
            out.append(cols if scored.reward is not None else Rejected(str(scored.error), "component_failed", cols))
        return out, (0, 0)

    def summary(self, engine: Any) -> dict[str, Any]:
        """Failures per component and reason (this run's rows)."""
        return {"failures": engine.counts.to_json()}

    def serving(self, engine: Any, normalization: str) -> str:
        return "components " + ", ".join(f"{n} ({k})" for n, k in engine.describe()["components"].items())


KIND = CompositeKind()
