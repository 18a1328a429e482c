"""Benchmark entries of results.json, computed from per-example rows; the file itself (format,
schema_version, reading and writing) is rmspec.rundir.results, re-exported here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmspec.evaluate.diagnostics import pair_diagnostics
from rmspec.evaluate.registry import infer_scorer
from rmspec.evaluate.scoring_rules import BenchmarkScore, score_rows
from rmspec.rundir.results import (
    SCHEMA_VERSION,
    new_results,
    read_jsonl,
    read_results,
    write_jsonl,
    write_results,
)

__all__ = ["SCHEMA_VERSION", "cli_summary", "entry", "new_results", "read_jsonl", "read_results", "unique_name",
           "write_jsonl", "write_results"]


def entry(name: str, kind: str, rows: list[dict[str, Any]], per_example_path: Path, *, source: str | None = None, split: str | None = None, score: BenchmarkScore | None = None, scorer: str | None = None) -> dict[str, Any]:
    """A benchmark's entry in results.json, computed from its per-example rows. scorer: the model
    that wrote them (reward, judge, process; None: read from the rows), recorded for the report."""
    scorer = scorer or infer_scorer(kind, rows)
    score = score or score_rows(kind, rows, scorer)
    data = score.to_json()
    data.update(
        name=name, source=source, split=split, per_example_path=str(Path(per_example_path).resolve()),
        diagnostics=pair_diagnostics(kind, rows, scorer=scorer), scorer=scorer,
    )
    if rows and all(r.get("source") for r in rows):  # a mixture's validation: accuracy per dataset
        data["per_source"] = per_source(rows)
    return data


def per_source(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Pair accuracy and examples per dataset of a mixture (rows carry `source`)."""
    from rmspec.evaluate.figures import accuracy_by_subset

    accuracy, counts = accuracy_by_subset([r["source"] for r in rows], [r["score_chosen"] for r in rows],
                                          [r["score_rejected"] for r in rows])
    return {name: {"accuracy": accuracy[name], "count": counts[name]} for name in sorted(accuracy)}


def unique_name(kind: str, path: str | None, taken: set[str]) -> str:
    name = kind
    if name in taken and path:
        name = f"{kind}-{Path(path).stem}"
    base, n = name, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def cli_summary(results: Mapping[str, Any]) -> dict[str, Any]:
    """What `rmspec eval --json` prints: per benchmark, overall/sections/subsets/per_example_path."""
    keys = ("kind", "overall", "sections", "subsets", "counts", "num_examples", "per_example_path", "notes")
    out = {name: {k: e.get(k) for k in keys} for name, e in results.get("benchmarks", {}).items()}
    if results.get("validation"):
        out["validation"] = {k: results["validation"].get(k) for k in keys}
    return out
