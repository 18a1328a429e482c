"""A composite reward (rmspec.composite) on OpenRLHF's `POST /get_reward`.

OpenRLHF posts `query` (prompt + response + the decoded EOS), `prompts` and `labels` (the
reference answers its dataset maps with --label_key). The response is the query after its prompt,
with the composite's `end_tokens` cut from its end; a trained model component with a chat template
scores the whole query as `rmspec serve` of that model would, an encoder (pair) or plain one the
(prompt, response) cut from it, as `rmspec score` does (rmspec.composite.components.model). Scoring runs in a worker thread, so a slow component
(a judge, a math-verify call near its limit) never blocks the server's event loop or another
request.

The answer: `rewards` (= `scores`), and `extra_logs` with each component's value per row (its raw
value; where it failed, the value its policy gave, or 0.0 where it was skipped or not routed) and,
for each failure reason that occurred, `<component>_<reason>` (1.0 on the rows it hit); component
names that would collide with these keys are refused at validate (rmspec.spec.composite). Failures
are also counted on /metrics (`rmspec_component_failures_total{component, reason}`). A row whose
reward cannot be given (on_failure: error) fails the request with 422, naming the component.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import Counter

from rmspec.composite.combine import RowReward
from rmspec.composite.outcome import Item
from rmspec.composite.scorer import CompositeScorer
from rmspec.serve.request_io import ApiError
from rmspec.spec.composite_component import OnFailureValue


class CompositeMetrics:
    def __init__(self, registry: Any):
        self.scored = Counter(
            "rmspec_component_rows", "Rows each composite component was asked about", ["component"], registry=registry
        )
        self.failures = Counter(
            "rmspec_component_failures",
            "Composite component failures by component and reason",
            ["component", "reason"],
            registry=registry,
        )
        self.rows_failed = Counter(
            "rmspec_composite_rows_failed",
            "Rows whose reward could not be given (on_failure: error)",
            registry=registry,
        )


def response_of(query: str, prompt: Any, end_tokens: list[str]) -> str:
    """The response inside OpenRLHF's query: the text after the prompt, end tokens cut from its end."""
    if not isinstance(prompt, str) or not query.startswith(prompt):
        raise ApiError(
            422,
            "a composite reward reads the response as the query after its prompt: send `prompts` "
            "(one per query, each the start of its query)",
            "prompts",
        )
    response = query[len(prompt) :]
    cut = True
    while cut:
        cut = False
        for token in end_tokens:
            if token and response.endswith(token):
                response, cut = response[: -len(token)], True
    return response


def items_of(
    scorer: CompositeScorer,
    queries: list[str],
    prompts: list[Any] | None,
    labels: list[Any] | None,
    routes: list[Any] | None,
) -> list[Item]:
    n = len(queries)
    for field, values in (("prompts", prompts), ("labels", labels), ("routes", routes)):
        if values is not None and len(values) != n:
            raise ApiError(422, f"{field} has {len(values)} entries for {n} queries: send one per query", field)
    if prompts is None:
        raise ApiError(422, "a composite reward needs `prompts` to find each response in its query", "prompts")
    if scorer.needs_reference and labels is None:
        raise ApiError(
            422,
            "this composite checks answers against references: send `labels` (OpenRLHF fills them from the dataset's label column)",
            "labels",
        )
    end = scorer.composite.end_tokens
    return [
        Item(
            prompt=prompts[i],
            response=response_of(queries[i], prompts[i], end),
            reference=labels[i] if labels is not None else None,
            route=None if routes is None or routes[i] is None else str(routes[i]),
            query=queries[i],
        )
        for i in range(n)
    ]


def logged_value(scorer: CompositeScorer, name: str, row: RowReward) -> float:
    value = row.values.get(name)
    if value is not None:
        return float(value)
    settings = next(c for c in scorer.composite.components if c.name == name)
    policy = settings.on_failure or scorer.composite.on_failure
    return policy.value if isinstance(policy, OnFailureValue) and name in row.failures else 0.0


async def composite_rewards(
    scorer: CompositeScorer,
    metrics: CompositeMetrics | None,
    queries: list[str],
    prompts: list[Any] | None,
    labels: list[Any] | None,
    routes: list[Any] | None = None,
) -> dict[str, Any]:
    items = items_of(scorer, queries, prompts, labels, routes)
    rows = await asyncio.to_thread(scorer.score_items, items)
    if metrics is not None:
        for row in rows:
            for name in row.values:
                metrics.scored.labels(name).inc()
            for name, reason in row.failures.items():
                metrics.failures.labels(name, reason).inc()
            if row.reward is None:
                metrics.rows_failed.inc()
    failed = [(i, r.error) for i, r in enumerate(rows) if r.reward is None]
    if failed:
        where = "; ".join(f"query {i}: {error}" for i, error in failed[:5])
        raise ApiError(
            422,
            f"{len(failed)} of {len(rows)} rewards could not be given ({where}); the composite's on_failure is "
            "error: set on_failure: skip or {value: X} to answer such rows",
            "query",
        )
    rewards = [float(r.reward) for r in rows]  # type: ignore[arg-type]  # None refused above
    extra: dict[str, list[float]] = {name: [logged_value(scorer, name, r) for r in rows] for name in scorer.labels}
    reasons = sorted({(name, reason) for r in rows for name, reason in r.failures.items()})
    for name, reason in reasons:
        extra[f"{name}_{reason}"] = [1.0 if r.failures.get(name) == reason else 0.0 for r in rows]
    if scorer.composite.gates:
        extra["gated"] = [float(r.gate is not None) for r in rows]
    return {"rewards": rewards, "scores": rewards, "extra_logs": extra}
