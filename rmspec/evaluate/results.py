"""Benchmark entries of results.json, computed from per-example rows; the file itself (format,
schema_version, reading and writing) is rmspec.rundir.results, re-exported here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmspec.evaluate.row_readers import read_as
from rmspec.evaluate.scoring_rules import BenchmarkScore, score_rows
from rmspec.rundir.results import (
    SCHEMA_VERSION,
    new_results,
    read_jsonl,
    read_results,
    write_jsonl,
    write_results,
)
from rmspec.spec.benchmarks import result_name

# The kind of a results.json entry that is a table of named metrics (an approach's validation, e.g.
# listwise pair_accuracy and kendall_tau), not a benchmark's rows and figures.
METRICS = "metrics"

__all__ = [
    "METRICS",
    "SCHEMA_VERSION",
    "cli_summary",
    "entry",
    "new_results",
    "read_jsonl",
    "read_results",
    "unique_name",
    "write_jsonl",
    "write_results",
]


def entry(
    name: str,
    kind: str,
    rows: list[dict[str, Any]],
    per_example_path: Path,
    *,
    source: str | None = None,
    split: str | None = None,
    score: BenchmarkScore | None = None,
    scorer: str | None = None,
) -> dict[str, Any]:
    """A benchmark's entry in results.json, computed from its per-example rows. scorer: the model
    that wrote them (reward, judge, process; None: read from the rows), recorded for the report."""
    reader = read_as(kind, rows, scorer)
    score = score or reader.score(kind, rows)
    data = score.to_json()
    data.update(
        name=name,
        source=source,
        split=split,
        per_example_path=str(Path(per_example_path).resolve()),
        diagnostics=reader.diagnostics(kind, rows),
        scorer=reader.scored_as,
    )
    if rows and all(r.get("source") for r in rows):  # a mixture's validation: accuracy per dataset
        data["per_source"] = per_source(kind, rows, reader.scored_as)
    return data


def per_source(kind: str, rows: list[dict[str, Any]], scorer: str) -> dict[str, dict[str, Any]]:
    """The entry's headline figure and examples per dataset of a mixture (rows carry `source`),
    by the same rule as the whole entry: pair accuracy for a reward model, both orders for a judge."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["source"], []).append(row)
    return {
        name: {"accuracy": score_rows(kind, group, scorer).overall, "count": len(group)}
        for name, group in sorted(groups.items())
    }


def unique_name(kind: str, path: str | None, taken: set[str], name: str | None = None) -> str:
    """A benchmark's name in results.json: the rule of rmspec.spec.benchmarks.result_name."""
    return result_name(kind, path, taken, name)


def cli_summary(results: Mapping[str, Any]) -> dict[str, Any]:
    """What `rmspec eval --json` prints: per benchmark, overall/sections/subsets/per_example_path."""
    keys = ("kind", "overall", "sections", "subsets", "counts", "num_examples", "per_example_path", "notes")
    out = {name: {k: e.get(k) for k in keys} for name, e in results.get("benchmarks", {}).items()}
    if results.get("validation"):
        out["validation"] = {k: results["validation"].get(k) for k in keys}
    return out
