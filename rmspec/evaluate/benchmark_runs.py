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

from rmspec.evaluate import registry
from rmspec.evaluate import results as res
from rmspec.evaluate.benchmarks import load_benchmark
from rmspec.inference import progress as scoring_progress
from rmspec.inference import scorers
from rmspec.spec.benchmarks import CATALOGUE, PROCESS, REWARD, kinds_scored_by


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


def _not_scored(kind: str, scorer: str) -> str:
    if scorer == PROCESS:
        return f"a process reward model is scored on {', '.join(kinds_scored_by(PROCESS))}"
    return (
        f"{kind} needs a process reward model (per-step scores)"
        if PROCESS in CATALOGUE[kind].scorers
        else f"{kind} is not scored by a reward model"
    )


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
    scorer = scorers.of(engine).scored_as  # how its rows are read: rewards, or a process model's steps
    for request in requests:
        info = CATALOGUE.get(request.kind)
        if info is not None and scorer not in info.scorers:
            results["notes"].append(f"{request.kind}: not scored: {_not_scored(request.kind, scorer)}")
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
        # a reward model scores each example's responses; a process model its steps (count not known here)
        total = sum(len(ex.responses) for ex in data.examples) if scorer == REWARD else None
        with scoring_progress.reporting(progress, f"scoring {request.kind}", total):
            rows = registry.get(request.kind).scored_rows(engine, data)
        name = res.unique_name(request.kind, request.path, taken, request.name)
        path = out_dir / f"{name}.jsonl"
        res.write_jsonl(path, rows)
        results["benchmarks"][name] = res.entry(
            name, request.kind, rows, path, source=data.source, split=data.split, scorer=scorer
        )
        results["benchmarks"][name]["notes"] += data.notes
    return results
