"""From the components' outcomes on one row to its reward: routing, the failure policy,
normalisation, gates and the weighted combination. Pure: no model, no I/O.

Order on a row: the route picks the components; the first gate that does not pass (its raw
value below the threshold, or its component failed and skipped; a failed gate component under
on_failure error fails the row) sets the reward to its floor, whatever else failed; then a failed
component follows its policy (error: the row fails; skip: left out; value X: it takes X in place
of its normalised value); values are normalised with the statistics `rmspec run` fitted;
weighted_sum = sum(w v) scaled by (sum |w| of the components used / sum |w| of those kept) when
components were skipped, weighted_mean = sum(w v) / sum |w| of those kept. Absolute weights: a
penalty (w < 0) stays a penalty when another component is skipped, and signed weights never sum to
a zero or negative denominator (docs/rewards_without_training.md, "Signed weights").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmspec.composite.outcome import Outcome
from rmspec.spec.composite import Composite
from rmspec.spec.composite_component import OnFailureValue


@dataclass
class RowReward:
    reward: float | None  # None: the row failed (`error` says why)
    values: dict[str, float | None]  # raw component values of the components used on the row
    failures: dict[str, str] = field(default_factory=dict)  # component -> reason
    gate: str | None = None  # the gate that set the floor
    error: str | None = None


def route_components(composite: Composite, route: Any) -> list[str]:
    """The component names used on a row whose route_by column holds `route`."""
    if composite.route_by is None:
        return [c.name for c in composite.components]
    assert composite.default_route is not None  # the spec requires it with route_by
    return composite.routes.get(str(route) if route is not None else "", composite.default_route)


def normalized(value: float, stats: Mapping[str, float] | None) -> float:
    """zscore: (v - mean) / std; minmax: (v - min) / (max - min); a zero spread leaves v - centre."""
    if not stats:
        return value
    if "mean" in stats:
        spread = stats["std"]
        return (value - stats["mean"]) / spread if spread > 0 else value - stats["mean"]
    width = stats["max"] - stats["min"]
    return (value - stats["min"]) / width if width > 0 else value - stats["min"]


def fit_stats(kind: str, values: Sequence[float]) -> dict[str, float] | None:
    """The normalisation statistics of one component on the training split (population std)."""
    if kind == "none":
        return None
    if not values:
        raise ValueError("no value to fit the normalisation on")
    if kind == "zscore":
        mean = sum(values) / len(values)
        return {"mean": mean, "std": math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))}
    return {"min": min(values), "max": max(values)}


def combine_row(
    composite: Composite,
    outcomes: Mapping[str, Outcome],
    route: Any = None,
    stats: Mapping[str, Mapping[str, float] | None] | None = None,
) -> RowReward:
    settings = {c.name: c for c in composite.components}
    used = route_components(composite, route)
    values = {name: outcomes[name].value for name in used}
    failures = {name: outcomes[name].reason or "" for name in used if outcomes[name].failed}
    for gate in composite.gates:  # first: a row that fails a gate gets its floor, whatever else failed
        if gate.component not in used:
            continue
        outcome = outcomes[gate.component]
        policy = settings[gate.component].on_failure or composite.on_failure
        if outcome.failed and policy == "error":
            return RowReward(None, values, failures, error=f"component {gate.component} failed: {outcome.reason}")
        raw = outcome.value if not outcome.failed else (policy.value if isinstance(policy, OnFailureValue) else None)
        if raw is None or raw < gate.threshold:
            return RowReward(gate.floor, values, failures, gate=gate.component)
    contributions: dict[str, float] = {}  # name -> the value combined (normalised, or the policy's)
    for name in used:
        outcome = outcomes[name]
        policy = settings[name].on_failure or composite.on_failure
        if not outcome.failed:
            assert outcome.value is not None
            contributions[name] = normalized(outcome.value, (stats or {}).get(name))
        elif policy == "error":
            return RowReward(None, values, failures, error=f"component {name} failed: {outcome.reason}")
        elif isinstance(policy, OnFailureValue):
            contributions[name] = policy.value
    # Masses are absolute weights: a negative weight (a penalty) keeps its sign whatever is skipped,
    # and weights of opposite signs never cancel into a zero or negative denominator.
    total = sum(abs(settings[n].weight) for n in used)
    kept = sum(abs(settings[n].weight) for n in contributions)
    weighted = sum(settings[n].weight * v for n, v in contributions.items())
    if composite.combine == "weighted_mean":
        if kept == 0:
            return RowReward(None, values, failures, error="no weighted component gave a value")
        return RowReward(weighted / kept, values, failures)
    if len(contributions) < len(used) and kept != total:  # skipped: renormalise to the written total
        if kept == 0:
            return RowReward(None, values, failures, error="no weighted component gave a value")
        weighted *= total / kept
    return RowReward(weighted, values, failures)
