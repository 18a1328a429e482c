"""Evaluate a model (any HF reward model folder) or a whole run directory.

`evaluate_run(run_dir, loaded_spec)` is what the trainer calls at the end of a run: it scores
the validation split and the spec's benchmarks with RUN/model, writes RUN/eval/*.jsonl,
RUN/results.json, the reward mean/std into RUN/model/config.json, and RUN/report.html.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from rmspec.errors import RmspecError
from rmspec.evaluate import results as res
from rmspec.evaluate.diagnostics import pairs_from_rows, reward_normalization, save_reward_stats
from rmspec.rundir import RunDir


@dataclass
class BenchmarkRequest:
    kind: str
    path: str | None = None
    split: str | None = None
    preset: str | None = None
    limit: int | None = None


def requests_from_spec(loaded_spec: Any) -> list[BenchmarkRequest]:
    return [BenchmarkRequest(b.kind, b.path, b.split, b.preset, b.limit) for b in loaded_spec.spec.eval.benchmarks]


def _say(progress: Callable[[str], None] | None, message: str) -> None:
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
    """Score each benchmark with the engine (rmspec.inference.engine.RewardEngine: the run's
    layout and max_length), write OUT_DIR/NAME.jsonl and add its entry to results['benchmarks']."""
    from rmspec.evaluate.benchmarks import load_benchmark, per_example_rows

    taken = set(results["benchmarks"])
    is_prm = getattr(engine, "kind", None) == "process"
    for request in requests:
        if (request.kind == "processbench") != is_prm:
            results["notes"].append(f"{request.kind}: not scored: " + (
                "a process reward model is scored on processbench" if is_prm else "processbench needs a process reward model (per-step scores)"))
            continue
        data = load_benchmark(request.kind, request.path, split=request.split, preset=request.preset, limit=request.limit, base_dir=base_dir)
        _say(progress, f"scoring {request.kind}: {len(data.examples)} examples from {data.source}")
        if is_prm:
            from rmspec.evaluate.processbench import processbench_rows

            rows = processbench_rows(engine, data)
        else:
            rows = per_example_rows(data, example_scores(engine, data.examples))
        name = res.unique_name(request.kind, request.path, taken)
        path = out_dir / f"{name}.jsonl"
        res.write_jsonl(path, rows)
        results["benchmarks"][name] = res.entry(name, request.kind, rows, path, source=data.source, split=data.split)
        results["benchmarks"][name]["notes"] += data.notes
    return results


def example_scores(engine: Any, examples: Sequence[Any]) -> list[list[float]]:
    """Rewards for each benchmark Example's responses, in the example's order: each prompt computed
    once for its responses where the model allows (RewardEngine.score_groups), same scores."""
    return engine.score_groups([(ex.prompt, list(ex.responses)) for ex in examples])


def evaluate_model(
    model_dir: str | Path,
    requests: Sequence[BenchmarkRequest],
    out_dir: Path,
    *,
    batch_size: int = 32,
    base_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """`rmspec eval MODEL_DIR`: any HF sequence-classification reward model folder."""
    from rmspec.inference.engine import RewardEngine

    engine = RewardEngine.load(model_dir, batch_size=batch_size)  # a token-classification PRM: a StepEngine
    results = res.new_results(str(Path(model_dir).resolve()))
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


def validation_rows(validation: Iterable[dict[str, Any]], engine: Any) -> list[dict[str, Any]]:
    """Per-example rows of the tokenized validation split (columns of rmspec.data.prepare)."""
    from rmspec.inference.encoding import Encoded

    rows = list(validation)
    # Encoders were trained with segment ids (prompt 0, response 1); score with them too.
    encoded = [Encoded(r["chosen_input_ids"], r.get("chosen_token_type_ids")) for r in rows] + \
              [Encoded(r["rejected_input_ids"], r.get("rejected_token_type_ids")) for r in rows]
    scores = [values[0] for values in engine.outputs(encoded)]
    n = len(rows)
    return [
        {
            "id": str(r.get("id", i)), "subset": str(r.get("group") or "all"),
            "score_chosen": scores[i], "score_rejected": scores[n + i],
            "len_chosen": len(r.get("chosen") or ""), "len_rejected": len(r.get("rejected") or ""),
        }
        for i, r in enumerate(rows)
    ]


def _prepare_validation(loaded_spec: Any, tokenizer: Any, notes: list[str], cache_dir: Path | None = None):
    try:
        from rmspec.data import prepare
    except ImportError:
        notes.append("validation split not scored: the data pipeline (rmspec.data.prepare) is not available")
        return None
    try:
        # The run's own cache (RUN/cache) holds the split training used: same rows, no recomputation.
        return prepare(loaded_spec, tokenizer, cache_dir=cache_dir if cache_dir and cache_dir.is_dir() else None).validation
    except RmspecError as exc:
        notes.append(f"validation split not scored: {exc.message}")
        return None


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

        evaluate_process_run(rd, loaded_spec, results, model=model, tokenizer=tokenizer, validation=validation,
                             requests=requests_from_spec(loaded_spec) if requests is None else requests,
                             batch_size=batch_size, progress=progress,
                             prepare_validation=lambda tok: _prepare_validation(loaded_spec, tok, notes, rd.root / "cache"))
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
            validation = _prepare_validation(loaded_spec, tokenizer, notes, rd.root / "cache")
        if validation is not None and spec.approach.kind == "bradley_terry":
            _say(progress, "scoring the validation split")
            rows = validation_rows(validation, engine)
            if rows:
                path = rd.eval_dir / "validation.jsonl"
                res.write_jsonl(path, rows)
                results["validation"] = res.entry("validation", "validation", rows, path, source="validation split")

    requests = requests_from_spec(loaded_spec) if requests is None else requests
    evaluate_benchmarks(engine, requests, rd.eval_dir, results, base_dir=loaded_spec.base_dir, progress=progress)
    _reward_stats(rd, results)
    res.write_results(rd.results, results)
    return _finish(rd, results, write_report and "html" in spec.output.report, console)


def evaluate_judge(rd: RunDir, loaded_spec: Any, results: dict[str, Any], requests: Sequence[BenchmarkRequest] | None,
                   batch_size: int | None, progress: Callable[[str], None] | None) -> None:
    """A generative judge: each pair benchmark judged in both orders (see rmspec.inference.judge)."""
    from rmspec.evaluate.benchmarks import load_benchmark
    from rmspec.inference.engine import RewardEngine
    from rmspec.inference.judge import JUDGE_KINDS, judge_rows

    spec = loaded_spec.spec
    requests = requests_from_spec(loaded_spec) if requests is None else requests
    usable = [r for r in requests if r.kind in JUDGE_KINDS]
    for r in requests:
        if r.kind not in JUDGE_KINDS:
            results["notes"].append(f"{r.kind}: not scored for a generative judge (pairwise benchmarks only: {', '.join(JUDGE_KINDS)})")
    if not usable:
        return
    engine = RewardEngine.load_judge(rd.model, spec, batch_size=batch_size)
    taken = set(results["benchmarks"])
    for request in usable:
        data = load_benchmark(request.kind, request.path, split=request.split, preset=request.preset, limit=request.limit, base_dir=loaded_spec.base_dir)
        _say(progress, f"judging {request.kind}: {len(data.examples)} pairs, both orders")
        rows = judge_rows(engine.model, engine.tokenizer, data, pattern=engine.verdict_pattern,
                          max_new_tokens=engine.max_new_tokens, layout=engine.layout, batch_size=engine.batch_size)
        name = res.unique_name(request.kind, request.path, taken)
        path = rd.eval_dir / f"{name}.jsonl"
        res.write_jsonl(path, rows)
        results["benchmarks"][name] = res.entry(name, request.kind, rows, path, source=data.source, split=data.split)


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
