"""`rmspec eval MODEL_OR_RUN`: benchmark scores by the official rules, per-example scores saved.

torch/transformers/datasets load inside the command only.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from rmspec.errors import RmspecError
from rmspec.spec.evaluation import BENCHMARK_DEFAULTS


def _requests(benchmarks: tuple[str, ...], paths: tuple[str, ...], limit: int | None):
    """Pair --benchmark KIND with --path FILE by position; KIND=PATH carries its own path."""
    from rmspec.evaluate.run_level import BenchmarkRequest

    parsed = []
    for item in benchmarks:
        kind, sep, path = item.partition("=")
        if kind not in BENCHMARK_DEFAULTS:
            raise RmspecError(
                f"--benchmark {item}: unknown benchmark {kind!r}", f"choose one of: {', '.join(BENCHMARK_DEFAULTS)}"
            )
        parsed.append((kind, path if sep else None))
    plain = [i for i, (_, path) in enumerate(parsed) if path is None]
    if paths and len(paths) != len(plain):
        raise RmspecError(
            f"{len(paths)} --path for {len(plain)} --benchmark without a path: cannot tell which file goes with which",
            "give one --path per --benchmark, in order, or write --benchmark KIND=FILE",
        )
    for i, path in zip(plain, paths):
        parsed[i] = (parsed[i][0], path)
    return [BenchmarkRequest(kind, path, limit=limit) for kind, path in parsed]


@click.command("eval")
@click.argument("target", type=click.Path())
@click.option(
    "--benchmark",
    "benchmarks",
    multiple=True,
    metavar="KIND[=FILE]",
    help=f"Benchmark to run ({', '.join(BENCHMARK_DEFAULTS)}); repeatable. Default for a run: the spec's eval.benchmarks.",
)
@click.option(
    "--path",
    "paths",
    multiple=True,
    metavar="FILE",
    help="Local file (JSON/JSONL/Parquet, official schema) for the --benchmark in the same position; default: the hub id.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Score at most this many examples per benchmark."
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=None, help="Sequences per scoring batch (sorted by length)."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Model folders: where per-example JSONL and results.json go (default rmspec-eval/NAME). "
    "A run always writes RUN/eval and RUN/results.json.",
)
@click.option(
    "--step-separator",
    default=None,
    metavar="TEXT",
    help="Process reward model folders: the text after every step, as the model was trained "
    '(default: the one saved in config.json, else TRL\'s "\\n"); e.g. " ;" for a '
    "tokenizer that drops newlines.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print per benchmark: overall, sections, subsets, per_example_path."
)
def eval_(
    target: str,
    benchmarks: tuple[str, ...],
    paths: tuple[str, ...],
    limit: int | None,
    batch_size: int | None,
    out_dir: str | None,
    step_separator: str | None,
    as_json: bool,
) -> None:
    """Score TARGET (a run directory or any Hugging Face reward-model folder) on benchmarks."""
    path = Path(target)
    if not path.exists():
        raise RmspecError(
            f"{target}: no such run directory or model folder",
            "give a run directory (runs/NAME) or a folder with config.json and weights",
        )
    requests = _requests(benchmarks, paths, limit) if benchmarks else None
    if paths and not benchmarks:
        raise RmspecError(
            "--path given without --benchmark", "name the benchmark the file belongs to: --benchmark pairs --path FILE"
        )
    progress = None if as_json else (lambda message: click.echo(message, err=True))

    from rmspec import documents
    from rmspec.evaluate import run_level
    from rmspec.extras import benchmark_needs, require, spec_needs
    from rmspec.inference.target import is_run_dir, load_run_spec

    asked = benchmark_needs([r.kind for r in requests or []])
    declared = documents.of_run(path)  # a run of a document that trains nothing (a composite): evaluated as a run

    if declared is not None and not declared.trains:
        if out_dir is not None or step_separator is not None:
            raise RmspecError(
                f"--out and --step-separator are for model folders: {path} is a {declared.name} run, "
                f"evaluated into {path / 'eval'} and {path / 'results.json'}",
                f"leave them out: rmspec eval {path}",
            )
        require(asked)
        results = declared.hook("evaluator")(path, requests, limit=limit, batch_size=batch_size, progress=progress)
    elif is_run_dir(path):
        if out_dir is not None:  # a run's evaluation is the run's: report, status and serve read it there
            raise RmspecError(
                f"--out is for model folders: a run's evaluation is written to {path / 'eval'} and "
                f"{path / 'results.json'}",
                f"leave out --out, or evaluate the model folder elsewhere: rmspec eval {path / 'model'} "
                f"--benchmark KIND --out {out_dir}",
            )
        if step_separator is not None:
            raise RmspecError(
                "--step-separator is for model folders: a run's model is scored with its spec's "
                "approach.step_separator",
                f"leave it out, or score the folder itself: rmspec eval {path / 'model'} ...",
            )
        loaded = load_run_spec(path)
        require(spec_needs(loaded.spec, training=False) + asked)  # before any model loads
        if limit is not None and requests is None:
            requests = [
                run_level.BenchmarkRequest(r.kind, r.path, r.split, r.preset, limit, r.name)
                for r in run_level.requests_from_spec(loaded)
            ]
        results = run_level.evaluate_run(path, loaded, requests=requests, batch_size=batch_size, progress=progress)
    else:
        if not requests:
            raise RmspecError(
                f"{target} is a model folder, not a run: no spec names its benchmarks",
                "add --benchmark KIND [--path FILE] (e.g. --benchmark rewardbench)",
            )
        require(asked)
        out = Path(out_dir) if out_dir else Path("rmspec-eval") / path.resolve().name
        results = run_level.evaluate_model(
            path, requests, out, batch_size=batch_size or 32, progress=progress, step_separator=step_separator
        )

    from rmspec.evaluate.results import cli_summary

    if as_json:
        click.echo(json.dumps(cli_summary(results), indent=2))
    else:
        from rmspec.render.report_view import print_results

        print_results(results)
