"""How far apart two trials' objectives must be to be told apart: each objective's standard error, and
which trials sit within noise of the best (issue 42 item 14: 0.563 vs 0.590 on 327 pairs is about one
standard error, and the report said nothing).

A trial's standard error is, in order: the spread of its seeds' values (sweep.seeds: training noise and
evaluation noise together), or the binomial error of a fraction over its examples, sqrt(p (1 - p) / n),
for `overall` (n = num_examples) and `subsets.NAME` (n = counts[NAME]) of results.json; otherwise unknown
(a mean margin, a calibration error: their spread over examples is not in results.json). Light: JSON only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

# Two objectives closer than this many standard errors of their difference are within noise.
Z = 2.0
# Fewer completed trials than this: importances and "best" are hints, and the report says so.
FEW_TRIALS = 10


def binomial_stderr(results: Mapping[str, Any], metric: str) -> tuple[float, str] | None:
    """(standard error, how) of a fraction of results.json at `metric`, or None when it is not one."""
    parts = metric.split(".")
    if len(parts) >= 3 and parts[-2] == "subsets":
        return _subset(results, parts)
    if parts[-1] != "overall":
        return None
    node: Any = results
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        return None
    value, n = node.get("overall"), node.get("num_examples")
    if not isinstance(value, (int, float)) or not isinstance(n, int) or n < 1 or not 0.0 <= value <= 1.0:
        return None
    return math.sqrt(value * (1 - value) / n), f"binomial over {n} examples"


def _subset(results: Mapping[str, Any], parts: list[str]) -> tuple[float, str] | None:
    if len(parts) < 3 or parts[-2] != "subsets":
        return None
    entry: Any = results
    for part in parts[:-2]:
        entry = entry.get(part) if isinstance(entry, Mapping) else None
    if not isinstance(entry, Mapping):
        return None
    value = (entry.get("subsets") or {}).get(parts[-1])
    n = (entry.get("counts") or {}).get(parts[-1])
    if not isinstance(value, (int, float)) or not isinstance(n, int) or n < 1 or not 0.0 <= value <= 1.0:
        return None
    return math.sqrt(value * (1 - value) / n), f"binomial over {n} examples"


def within_noise(best: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> list[int] | None:
    """Numbers of the completed trials whose objective is within Z standard errors of the best's (the
    errors of the two combined); None when the best's standard error is unknown."""
    if best.get("stderr") is None or best.get("objective") is None:
        return None
    close = []
    for trial in others:
        if trial.get("number") == best.get("number") or trial.get("objective") is None:
            continue
        error = trial.get("stderr")
        if error is None:
            continue
        if abs(best["objective"] - trial["objective"]) <= Z * math.hypot(best["stderr"], error):
            close.append(trial["number"])
    return close
