"""`rmspec score MODEL_OR_RUN INPUT`: every row of a file scored (or judged), input columns kept.

torch/transformers load inside the command only.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click

from rmspec.errors import RmspecError


@click.command("score")
@click.argument("target", type=click.Path())
@click.argument("input_path", metavar="INPUT", type=click.Path())
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Scored rows, .jsonl or .csv (default: INPUT's name + .scored.jsonl, here). Rejects go next to it.",
)
@click.option(
    "--columns",
    default=None,
    metavar="ROLE=COL,...",
    help="Which columns hold prompt, response, chosen, rejected or messages (default: detected).",
)
@click.option("--split", default=None, help="The split of a save_to_disk DatasetDict.")
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=None, help="Sequences per forward pass (sorted by length)."
)
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Rows read, scored and written at a time (bounds memory).",
)
@click.option("--resume", is_flag=True, help="Continue an interrupted run into the same --out, skipping finished rows.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out.")
@click.option(
    "--step-separator",
    default=None,
    metavar="TEXT",
    help="Process reward models: the text after every step, as the model was trained (default: the "
    'saved one, else TRL\'s "\\n"); e.g. " ;" for a tokenizer that drops newlines.',
)
@click.option(
    "--allow-image-urls",
    is_flag=True,
    help="Vision reward models: download images given as http(s) URLs (off: such a row is rejected, "
    "image_url_refused); a failed download rejects the row (image_download_failed).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (no progress bar).")
def score(
    target: str,
    input_path: str,
    out_path: str | None,
    columns: str | None,
    split: str | None,
    batch_size: int | None,
    chunk_rows: int,
    resume: bool,
    overwrite: bool,
    step_separator: str | None,
    allow_image_urls: bool,
    as_json: bool,
) -> None:
    """Score INPUT (JSONL, JSON, Parquet, CSV or a save_to_disk folder) with TARGET (a run or a model folder)."""
    if resume and overwrite:
        raise RmspecError("--resume and --overwrite contradict each other", "keep one")
    if not Path(target).exists():
        raise RmspecError(
            f"{target}: no such run directory or model folder",
            "give a run directory (runs/NAME) or a folder with config.json and weights",
        )
    from rmspec.score.reader import detect_format

    if not Path(input_path).exists():
        raise RmspecError(
            f"{input_path}: file not found", "give a JSONL, JSON, Parquet or CSV file, or a save_to_disk folder"
        )
    detect_format(Path(input_path))
    from rmspec.cli.extras_check import require_for_target

    require_for_target(target)  # a composite's rules (math-verify): exit 2 before any row is scored
    out = Path(out_path) if out_path else Path(Path(input_path).name.split(".")[0] + ".scored.jsonl")

    from transformers.utils import logging as transformers_logging

    from rmspec.inference.engine import load_scorer
    from rmspec.score.runner import score_file

    transformers_logging.disable_progress_bar()  # its "Loading weights" bar: the scoring bar below is ours
    engine = load_scorer(target, batch_size=batch_size, step_separator=step_separator)
    run = functools.partial(
        score_file,
        engine,
        input_path,
        out,
        target=target,
        columns=columns,
        split=split,
        chunk_rows=chunk_rows,
        batch_size=batch_size,
        resume=resume,
        overwrite=overwrite,
        allow_image_urls=allow_image_urls,
    )
    if as_json:
        click.echo(json.dumps(run(), indent=2))
        return
    summary = _with_progress_bar(lambda progress: run(progress=progress))
    _print_summary(summary)


def _with_progress_bar(run):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RowsPerSecond(ProgressColumn):
        def render(self, task):  # rows of this run over its time: a resumed run's skipped rows do not count
            done = task.completed - (task.fields.get("start_row") or 0)
            return Text(f"{done / task.elapsed if task.elapsed else 0.0:,.0f} rows/s")

    with Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        RowsPerSecond(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task("score", total=None, start_row=None)

        def progress(done: int, total: int | None) -> None:
            if bar.tasks[0].fields.get("start_row") is None:
                bar.update(task, start_row=done)
            bar.update(task, completed=done, total=total)

        return run(progress)


def _print_summary(s: dict) -> None:
    echo = lambda m: click.echo(m, err=True)  # noqa: E731
    if s.get("already_complete"):
        echo(f"{s['out']} is already complete ({s['scored']} rows scored, {s['rejected']} rejected).")
        return
    resumed = f" (resumed after row {s['resumed_from_row']})" if s["resumed_from_row"] else ""
    rate = f", {s['rows_per_second']:,.0f} rows/s" if s.get("rows_per_second") else ""
    echo(
        f"{s['rows_read']} rows read{resumed}: {s['scored']} scored, {s['rejected']} rejected{rate}; rows: {s['shape']}"
    )
    echo(f"scores:  {s['out']}")
    if s["rejected"]:
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(s["rejected_by_reason"].items(), key=lambda kv: -kv[1]))
        echo(f"rejects: {s['rejects']} ({reasons})")
    else:
        echo("rejects: none (no rejects file written)")
    for name, counts in (s.get("failures") or {}).get("components", {}).items():  # a composite's components
        failed = ", ".join(f"{n} {why}" for why, n in counts["failed"].items()) or "none"
        echo(f"component {name}: {counts['scored']} rows, failures: {failed}")
