"""Evaluate a model (any HF reward model folder) or a whole run directory.

`evaluate_run(run_dir, loaded_spec)` is what the trainer calls at the end of a run: it scores
the validation split and the spec's benchmarks with RUN/model, writes RUN/eval/*.jsonl,
RUN/results.json, the reward mean/std into RUN/model/config.json, and RUN/report.html.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rmspec import approaches
from rmspec.evaluate import results as res
from rmspec.evaluate.benchmark_runs import BenchmarkRequest, evaluate_benchmarks, requests_from_spec
from rmspec.rundir import RunDir

__all__ = ["BenchmarkRequest", "evaluate_model", "evaluate_run"]


def evaluate_model(
    model_dir: str | Path,
    requests: Sequence[BenchmarkRequest],
    out_dir: Path,
    *,
    batch_size: int = 32,
    base_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    step_separator: str | None = None,
) -> dict[str, Any]:
    """`rmspec eval MODEL_DIR`: any HF reward model folder (a token classifier: a process reward
    model, its steps joined by `step_separator`, else the saved separator or TRL's "\\n")."""
    from rmspec.inference.engine import load_scorer

    # a token-classification PRM: a StepEngine
    engine = load_scorer(model_dir, batch_size=batch_size, step_separator=step_separator)
    results = res.new_results(str(Path(model_dir).resolve()))
    note_fresh_head(getattr(engine, "model", None), results)  # a composite (rules, judges, models) has no head
    evaluate_benchmarks(engine, requests, out_dir, results, base_dir=base_dir, progress=progress)
    res.write_results(out_dir / "results.json", results)
    return results


def note_fresh_head(model: Any, results: dict[str, Any]) -> None:
    fresh = getattr(model, "rmspec_fresh_head", None)
    if fresh:
        results["notes"].append(
            f"the checkpoint has no trained score head ({', '.join(fresh)} newly initialized): these scores are from a random head"
        )


def evaluate_run(
    run_dir: Path,
    loaded_spec: Any,
    *,
    model: Any = None,
    tokenizer: Any = None,
    validation: Iterable[dict[str, Any]] | None = None,
    requests: Sequence[BenchmarkRequest] | None = None,
    batch_size: int | None = None,
    write_report: bool = True,
    console: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Score the run's model on its validation split and benchmarks; write eval/, results.json, report.html.

    The approach's `evaluation` hook (rmspec.approaches) does the scoring. model/tokenizer: the
    trained model in memory (else loaded from RUN/model); validation: the tokenized validation split,
    else rebuilt with rmspec.data.prepare when spec.eval.validation is on; requests: benchmarks to run
    instead of the spec's; batch_size: instead of spec.eval.batch_size. Returns the results dict
    written to results.json.
    """
    rd = RunDir(Path(run_dir))
    spec = loaded_spec.spec
    results = res.new_results(str(rd.model.resolve()), spec.name)
    approaches.of(spec).hook("evaluation")(
        rd,
        loaded_spec,
        results,
        model=model,
        tokenizer=tokenizer,
        validation=validation,
        requests=requests_from_spec(loaded_spec) if requests is None else requests,
        batch_size=batch_size,
        progress=progress,
    )
    res.write_results(rd.results, results)
    return _finish(rd, results, write_report and "html" in spec.output.report, console)


def _finish(rd: RunDir, results: dict[str, Any], write_report: bool, console: bool) -> dict[str, Any]:
    if write_report:
        from rmspec.evaluate.report import write_html_report

        write_html_report(rd.root)
    if console:
        from rmspec.render.report_view import print_run_summary

        print_run_summary(rd.root)
    return results
