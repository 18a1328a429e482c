"""A metric of a run by its dotted path into results.json (`validation.overall`,
`benchmarks.pairs.subsets.math`). Light: reads JSON only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmspec.errors import RmspecError


def metric_at(results: Mapping[str, Any], path: str) -> float:
    """The number at `path`, or an error naming what the level it stopped at holds."""
    node: Any = results
    for i, part in enumerate(path.split(".")):
        if not isinstance(node, Mapping) or part not in node:
            where = ".".join(path.split(".")[:i]) or "results.json"
            held = ", ".join(sorted(node)) if isinstance(node, Mapping) else type(node).__name__
            raise RmspecError(f"{path} is not in results.json: {where} holds {held or 'nothing'}")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise RmspecError(f"{path} in results.json is not a number ({type(node).__name__})")
    return float(node)


def numbers_under(results: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Every number of a results.json tree by its dotted path (compare's columns); lists are skipped."""
    out: dict[str, float] = {}
    for key, value in results.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(numbers_under(value, path + "."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[path] = float(value)
    return out
