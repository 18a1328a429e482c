"""Benchmarks by kind: load one (hub id or local file in its official schema), lay out its scores.

Every benchmark becomes a `BenchmarkData` of `Example`s (rmspec.evaluate.loading); after scoring,
`per_example_rows` turns the scores into the JSONL rows saved in RUN/eval/ and
`scoring_rules.score_rows` turns those rows into the official figures. What each kind does is in
its module under rmspec/evaluate/kinds/, found through rmspec.evaluate.registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmspec.evaluate import registry
from rmspec.evaluate.loading import BenchmarkData, Example, unknown_kind
from rmspec.spec.benchmarks import CATALOGUE

__all__ = ["BenchmarkData", "Example", "load_benchmark", "per_example_rows"]


def load_benchmark(
    kind: str,
    path: str | None = None,
    *,
    split: str | None = None,
    preset: str | None = None,
    limit: int | None = None,
    base_dir: Path | None = None,
) -> BenchmarkData:
    """Load a benchmark from its hub id (default) or a local JSON/JSONL/Parquet file in its official schema."""
    if kind not in CATALOGUE:
        raise unknown_kind(kind)
    return registry.get(kind).load(path, split=split, preset=preset, limit=limit, base_dir=base_dir)


def per_example_rows(data: BenchmarkData, scores: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """The JSONL rows saved per example: id, subset and the scores in the kind's layout (its
    module's docstring lists the fields), with response lengths for the length-bias diagnostics."""
    return registry.get(data.kind).per_example_rows(data, scores)
