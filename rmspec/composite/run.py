"""`rmspec run SPEC` for a composite reward (approach kind composite): nothing is trained. The
composite document's `runner` and `evaluator` hooks (rmspec.documents.composite) name this module.

1. The components are built (models loaded with `load_scorer`, judges reached, the math-verify
   pool started).
2. The normalisation of each component with `normalize: zscore|minmax` is fitted on `data.train`
   (its successful values; failures are counted and left out of the fit).
3. RUN/reward.yaml is written (the composite with absolute paths, the statistics, versions): what
   `rmspec score RUN` and `rmspec serve RUN` load.
4. `data.validation` is scored (RUN/eval/validation.jsonl, one row per input with every
   component's value and failure) and the spec's benchmarks as for any model.
5. RUN/results.json: the validation figures (reward mean/std, each component's mean, its mean
   contribution to the reward, how often each gate set the floor, Pearson correlations between
   components) and the failure counts per component and reason, for the fit, the validation rows
   and each benchmark; they reconcile with the per-row files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rmspec.composite.combine import RowReward, fit_stats, normalized
from rmspec.composite.components.context import Context
from rmspec.composite.counts import FailureCounts
from rmspec.composite.reward_file import write_reward_file
from rmspec.composite.rows import read_items
from rmspec.composite.scorer import CompositeScorer
from rmspec.errors import RmspecError, RunError
from rmspec.evaluate.results import METRICS
from rmspec.rundir import RunDir, write_status
from rmspec.rundir import results as res
from rmspec.spec.composite_spec import LoadedComposite


def run_dir_of(loaded: LoadedComposite) -> Path:
    return Path(loaded.spec.output.dir.format(name=loaded.spec.name))


def run_composite(
    loaded: LoadedComposite, *, overwrite: bool = False, progress: Callable[[str], None] | None = None
) -> Path:
    from rmspec.evaluate.benchmark_runs import requests_from_spec
    from rmspec.inference.engine import load_scorer

    say = progress or (lambda message: None)
    spec, base = loaded.spec, loaded.base_dir
    run = run_dir_of(loaded)
    if (run / "results.json").exists() and not overwrite:
        raise RmspecError(f"{run} already holds a run", "pass --overwrite to replace it, or set output.dir")
    run.mkdir(parents=True, exist_ok=True)
    (run / "spec.yaml").write_text(loaded.file.read_text(encoding="utf-8"), encoding="utf-8")
    batch = spec.eval.batch_size  # a model component's sequences per forward pass
    context = Context(base_dir=base, load_model=lambda path: load_scorer(path, batch_size=batch))
    scorer = CompositeScorer(spec.approach, context, fitting=True)
    try:
        results = res.new_results(str(run.resolve()), str(run.resolve()))
        results["composite"] = {"components": scorer.describe()["components"]}
        if spec.data.train is not None:
            say(f"fitting the normalisation on {spec.data.train}")
            scorer.stats, results["composite"]["fit"] = fit(scorer, base / spec.data.train, spec.data.limit)
        write_reward_file(run, spec.approach, scorer.stats, base)
        say(f"wrote {run / 'reward.yaml'}")
        eval_dir = run / "eval"
        eval_dir.mkdir(exist_ok=True)
        if spec.eval.validation and spec.data.validation is not None:
            say(f"scoring the validation rows of {spec.data.validation}")
            results["validation"] = validate(scorer, base / spec.data.validation, spec.data.limit, eval_dir)
        results["composite"]["spec_dir"] = str(base.resolve())  # `rmspec eval RUN` finds the spec's benchmarks
        score_benchmarks(scorer, requests_from_spec(loaded), eval_dir, results, base, say)
        res.write_results(run / "results.json", results)
        write_status(RunDir(run), "completed", metrics=(results.get("validation") or {}).get("metrics"))
    except BaseException as exc:  # status.json says the run failed, as for a trained run
        write_status(RunDir(run), "failed", error=str(exc)[:500])
        raise
    finally:
        scorer.close()
    return run


def score_benchmarks(
    scorer: CompositeScorer,
    requests: Sequence[Any],
    eval_dir: Path,
    results: dict[str, Any],
    base: Path,
    say: Callable[[str], None],
) -> None:
    """Each benchmark scored as for any model, with the failure counts of its own rows."""
    from rmspec.evaluate.benchmark_runs import evaluate_benchmarks

    for request in requests:
        scorer.counts = FailureCounts(scorer.labels)
        before = set(results["benchmarks"])
        evaluate_benchmarks(scorer, [request], eval_dir, results, base_dir=base, progress=say)
        for name in set(results["benchmarks"]) - before:
            results["benchmarks"][name]["failures"] = scorer.counts.to_json()


def evaluate_composite_run(
    run: Path,
    requests: Sequence[Any] | None,
    *,
    limit: int | None = None,
    batch_size: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """`rmspec eval RUN` on a composite run: the benchmarks (default: its spec's, their relative paths
    read from the spec's folder) scored by RUN/reward.yaml into RUN/eval; RUN/results.json keeps its
    validation and fit and gets the new benchmark entries in place of the old."""
    from rmspec.composite.scorer import load_composite
    from rmspec.evaluate.benchmark_runs import BenchmarkRequest
    from rmspec.inference.engine import load_scorer
    from rmspec.spec.composite_spec import CompositeSpec
    from rmspec.spec.yaml_io import read_yaml_file

    say = progress or (lambda message: None)
    results = res.read_results(run / "results.json")
    base = Path((results.get("composite") or {}).get("spec_dir") or run)
    if requests is None:
        document, _ = read_yaml_file(run / "spec.yaml")
        benchmarks = CompositeSpec.model_validate(document).eval.benchmarks
        requests = [BenchmarkRequest(b.kind, b.path, b.split, b.preset, limit or b.limit, b.name) for b in benchmarks]
    if not requests:
        raise RmspecError(
            f"{run}: its spec names no benchmarks", "add --benchmark KIND [--path FILE] (e.g. --benchmark pairs)"
        )
    scorer = load_composite(run, load_model=lambda path: load_scorer(path, batch_size=batch_size or 32))
    try:
        results["benchmarks"] = {}
        eval_dir = run / "eval"
        eval_dir.mkdir(exist_ok=True)
        score_benchmarks(scorer, requests, eval_dir, results, base, say)
    finally:
        scorer.close()
    res.write_results(run / "results.json", results)
    return results


def fit(scorer: CompositeScorer, path: Path, limit: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The statistics of each normalised component on the training rows, and what the fit saw."""
    items, rejects = read_items(path, scorer.composite, limit)
    outcomes = scorer.outcomes(items)
    stats: dict[str, Any] = {}
    counts = FailureCounts(scorer.labels)
    for row in outcomes:
        counts.add({name: o.reason for name, o in row.items()}, False)
    for c in scorer.composite.components:
        if c.normalize == "none":
            continue
        values = [row[c.name].value for row in outcomes if c.name in row and row[c.name].value is not None]
        if not values:
            raise RunError(
                f"component {c.name}: no training row gave a value to fit {c.normalize} on",
                "check data.train's rows (see the failure counts with `rmspec score`) or set normalize: none",
            )
        stats[c.name] = fit_stats(c.normalize, [float(v) for v in values])  # type: ignore[arg-type]
    counted = counts.to_json()
    return stats, {
        "file": str(path),
        "rows": len(items),
        "rejected": len(rejects),
        "failures": counted["components"],
        "stats": stats,
    }


def validate(scorer: CompositeScorer, path: Path, limit: int | None, eval_dir: Path) -> dict[str, Any]:
    items, rejects = read_items(path, scorer.composite, limit)
    scorer.counts = FailureCounts(scorer.labels)
    rows = scorer.score_items(items)
    per_example = [
        {"index": i, "reward": r.reward, "gate": r.gate, "error": r.error, "values": r.values, "failures": r.failures}
        for i, r in enumerate(rows)
    ]
    path_out = eval_dir / "validation.jsonl"
    res.write_jsonl(path_out, per_example)
    rewards = [r.reward for r in rows if r.reward is not None]
    return {
        "kind": METRICS,  # a table of named metrics for the report, not a benchmark's rows
        "num_examples": len(items),
        "file": str(path),
        "per_example_path": str(path_out.resolve()),
        "rows": len(items),
        "rejected": len(rejects),
        "metrics": {
            "reward_mean": _mean(rewards),
            "reward_std": _std(rewards),
            "rows_scored": len(rewards),
            "rows_failed": len(rows) - len(rewards),
        },
        "components": component_figures(scorer, rows),
        "gates": {g.component: sum(1 for r in rows if r.gate == g.component) for g in scorer.composite.gates},
        "correlations": correlations(scorer.labels, rows),
        "failures": scorer.counts.to_json(),
    }


def component_figures(scorer: CompositeScorer, rows: Sequence[RowReward]) -> dict[str, Any]:
    """Per component: rows used, mean raw value, mean weighted (normalised) contribution to the reward."""
    out = {}
    for c in scorer.composite.components:
        values = [r.values[c.name] for r in rows if r.values.get(c.name) is not None]
        contributions = [c.weight * normalized(float(v), scorer.stats.get(c.name)) for v in values]  # type: ignore[arg-type]
        out[c.name] = {
            "rows": sum(1 for r in rows if c.name in r.values),
            "mean": _mean(values),  # type: ignore[arg-type]
            "contribution": _mean(contributions),
            "weight": c.weight,
        }
    return out


def correlations(names: Sequence[str], rows: Sequence[RowReward]) -> dict[str, float | None]:
    """Pearson r of each pair of components over the rows where both gave a value (None: < 3 rows or no spread)."""
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pairs = [
                (r.values[a], r.values[b]) for r in rows if r.values.get(a) is not None and r.values.get(b) is not None
            ]
            out[f"{a}~{b}"] = _pearson(pairs)  # type: ignore[arg-type]
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    if not values:
        return None
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def _pearson(pairs: Sequence[tuple[float, float]]) -> float | None:
    if len(pairs) < 3:
        return None
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx == 0 or sy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in pairs) / (sx * sy)
