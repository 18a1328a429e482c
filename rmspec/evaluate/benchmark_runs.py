"""Score the requested benchmarks with an engine: one per-example JSONL and one results entry each.

Used by the end-of-run evaluation of every approach (rmspec.evaluate.run_level,
rmspec.evaluate.process_run) and by `rmspec eval MODEL`. Which kinds an engine can score and how
each is loaded and laid out come from the benchmark registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.evaluate import registry, row_readers
from rmspec.evaluate import results as res
from rmspec.evaluate.benchmarks import load_benchmark
from rmspec.inference import progress as scoring_progress
from rmspec.inference import scorers
from rmspec.spec.benchmarks import CATALOGUE


@dataclass
class BenchmarkRequest:
    kind: str
    path: str | None = None
    split: str | None = None
    preset: str | None = None
    limit: int | None = None
    name: str | None = None  # the spec's eval.benchmarks[].name (rmspec.spec.benchmarks.result_name)


def requests_from_spec(loaded_spec: Any) -> list[BenchmarkRequest]:
    return [
        BenchmarkRequest(b.kind, b.path, b.split, b.preset, b.limit, b.name) for b in loaded_spec.spec.eval.benchmarks
    ]


def say(progress: Callable[[str], None] | None, message: str) -> None:
    if progress is not None:
        progress(message)


def evaluate_benchmarks(
    engine: Any,
    requests: Sequence[BenchmarkRequest],
    out_dir: Path,
    results: dict[str, Any],
    *,
    base_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Score each benchmark with the engine (a RewardEngine, or a StepEngine for a process reward
    model), write OUT_DIR/NAME.jsonl and add its entry to results['benchmarks']."""
    taken = set(results["benchmarks"])
    reader = row_readers.of(scorers.of(engine).scored_as)  # how its rows are read: rewards, or steps
    for request in requests:
        info = CATALOGUE.get(request.kind)
        if info is not None and reader.scored_as not in info.scorers:
            results["notes"].append(f"{request.kind}: not scored: {reader.not_scored(request.kind)}")
            continue
        data = load_benchmark(
            request.kind,
            request.path,
            split=request.split,
            preset=request.preset,
            limit=request.limit,
            base_dir=base_dir,
        )
        say(progress, f"scoring {request.kind}: {len(data.examples)} examples from {data.source}")
        with scoring_progress.reporting(progress, f"scoring {request.kind}", reader.progress_total(data)):
            rows = registry.get(request.kind).scored_rows(engine, data)
        name = res.unique_name(request.kind, request.path, taken, request.name)
        path = out_dir / f"{name}.jsonl"
        res.write_jsonl(path, rows)
        results["benchmarks"][name] = res.entry(
            name, request.kind, rows, path, source=data.source, split=data.split, scorer=reader.scored_as
        )
        results["benchmarks"][name]["notes"] += data.notes
    return results
