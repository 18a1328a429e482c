"""Evaluate a model (any HF reward model folder) or a whole run directory.

`evaluate_run(run_dir, loaded_spec)` is what the trainer calls at the end of a run: it scores
the validation split and the spec's benchmarks with RUN/model, writes RUN/eval/*.jsonl,
RUN/results.json, the reward mean/std into RUN/model/config.json, and RUN/report.html.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rmspec.evaluate import results as res
from rmspec.evaluate.benchmark_runs import BenchmarkRequest, evaluate_benchmarks, requests_from_spec, say
from rmspec.evaluate.diagnostics import pairs_from_rows, reward_normalization, save_reward_stats
from rmspec.evaluate.validation import prepare_validation, validation_rows
from rmspec.rundir import RunDir
from rmspec.spec.benchmarks import JUDGE, REWARD

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
    from rmspec.composite.scorer import CompositeScorer

    if not isinstance(engine, CompositeScorer):  # a composite (rules, judges, models) has no head of its own
        _note_fresh_head(engine.model, results)
    evaluate_benchmarks(engine, requests, out_dir, results, base_dir=base_dir, progress=progress)
    res.write_results(out_dir / "results.json", results)
    return results


def _note_fresh_head(model: Any, results: dict[str, Any]) -> None:
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

    model/tokenizer: the trained model in memory (else loaded from RUN/model); validation: the
    tokenized validation split (rows with chosen_input_ids, rejected_input_ids, id, group, chosen,
    rejected), else rebuilt with rmspec.data.prepare when spec.eval.validation is on; requests:
    benchmarks to run instead of the spec's; batch_size: instead of spec.eval.batch_size. Returns the results dict written to results.json.
    """
    rd = RunDir(Path(run_dir))
    spec = loaded_spec.spec
    results = res.new_results(str(rd.model.resolve()), spec.name)
    notes: list[str] = results["notes"]
    if spec.approach.kind == "generative":
        evaluate_judge(rd, loaded_spec, results, requests, batch_size, progress)
        res.write_results(rd.results, results)
        return _finish(rd, results, write_report and "html" in spec.output.report, console)
    if spec.approach.kind == "process":
        from rmspec.evaluate.process_run import evaluate_process_run

        evaluate_process_run(
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
    from rmspec.inference.engine import RewardEngine
    from rmspec.inference.loading import load_reward_model

    if model is None or tokenizer is None:
        model, tokenizer = load_reward_model(rd.model)
    engine = RewardEngine.from_parts(model, tokenizer, spec, batch_size=batch_size)
    _note_fresh_head(model, results)
    if spec.approach.kind == "pointwise":
        notes.append("pointwise model: benchmarks rank by the first head output")

    if spec.eval.validation:
        if validation is None:
            validation = prepare_validation(loaded_spec, tokenizer, notes, rd.root / "cache")
        if validation is not None and spec.approach.kind == "bradley_terry":
            say(progress, "scoring the validation split")
            rows = validation_rows(validation, engine)
            if rows:
                path = rd.eval_dir / "validation.jsonl"
                res.write_jsonl(path, rows)
                results["validation"] = res.entry(
                    "validation", "validation", rows, path, source="validation split", scorer=REWARD
                )

    requests = requests_from_spec(loaded_spec) if requests is None else requests
    evaluate_benchmarks(engine, requests, rd.eval_dir, results, base_dir=loaded_spec.base_dir, progress=progress)
    _reward_stats(rd, results)
    res.write_results(rd.results, results)
    return _finish(rd, results, write_report and "html" in spec.output.report, console)


def evaluate_judge(
    rd: RunDir,
    loaded_spec: Any,
    results: dict[str, Any],
    requests: Sequence[BenchmarkRequest] | None,
    batch_size: int | None,
    progress: Callable[[str], None] | None,
) -> None:
    """A generative judge: each pair benchmark judged in both orders (see rmspec.inference.judge)."""
    from rmspec.evaluate.benchmarks import load_benchmark
    from rmspec.inference.engine import RewardEngine
    from rmspec.inference.judge import JUDGE_KINDS, judge_rows

    spec = loaded_spec.spec
    requests = requests_from_spec(loaded_spec) if requests is None else requests
    usable = [r for r in requests if r.kind in JUDGE_KINDS]
    for r in requests:
        if r.kind not in JUDGE_KINDS:
            results["notes"].append(
                f"{r.kind}: not scored for a generative judge (pairwise benchmarks only: {', '.join(JUDGE_KINDS)})"
            )
    if not usable:
        return
    engine = RewardEngine.load_judge(rd.model, spec, batch_size=batch_size)
    taken = set(results["benchmarks"])
    for request in usable:
        data = load_benchmark(
            request.kind,
            request.path,
            split=request.split,
            preset=request.preset,
            limit=request.limit,
            base_dir=loaded_spec.base_dir,
        )
        say(progress, f"judging {request.kind}: {len(data.examples)} pairs, both orders")
        assert engine.verdict_pattern is not None  # load_judge sets it from approach.verdict_pattern
        rows = judge_rows(
            engine.model,
            engine.tokenizer,
            data,
            pattern=engine.verdict_pattern,
            max_new_tokens=engine.max_new_tokens,
            layout=engine.layout,
            batch_size=engine.batch_size,
        )
        name = res.unique_name(request.kind, request.path, taken)
        path = rd.eval_dir / f"{name}.jsonl"
        res.write_jsonl(path, rows)
        results["benchmarks"][name] = res.entry(
            name, request.kind, rows, path, source=data.source, split=data.split, scorer=JUDGE
        )


def _reward_stats(rd: RunDir, results: dict[str, Any]) -> None:
    """Mean/std of rewards on the validation split (else the first benchmark) into the model config."""
    source = "validation" if results["validation"] else next(iter(results["benchmarks"]), None)
    if source is None:
        return
    entry = results["validation"] if source == "validation" else results["benchmarks"][source]
    pairs = pairs_from_rows(entry["kind"], res.read_jsonl(Path(entry["per_example_path"])))
    stats = reward_normalization([p.chosen for p in pairs], [p.rejected for p in pairs])
    if (rd.model / "config.json").exists():
        save_reward_stats(rd.model, stats, source)
    results["reward_stats"] = {**stats, "source": source}


def _finish(rd: RunDir, results: dict[str, Any], write_report: bool, console: bool) -> dict[str, Any]:
    if write_report:
        from rmspec.evaluate.report import write_html_report

        write_html_report(rd.root)
    if console:
        from rmspec.render.report_view import print_run_summary

        print_run_summary(rd.root)
    return results
