"""`rmspec data preview|report SPEC`: the rows as the model sees them, and the data quality report.

Heavy work (datasets, transformers) is imported inside the commands only."""

from __future__ import annotations

import json
import sys

import click

from rmspec.cli.options import SpecFile, set_option


@click.group()
def data() -> None:
    """Preview the mapped rows or report on the data (rejects, lengths, quality)."""


@data.command()
@click.argument("spec_file", type=SpecFile(training_only="data preview"))
@set_option
@click.option("-n", "n", default=5, show_default=True, help="How many rows to show.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of records.")
def preview(spec_file: str, sets: tuple[str, ...], n: int, as_json: bool) -> None:
    """Show the first N rows after mapping and filters, as the model will see them (chat template applied)."""
    from rmspec.spec import load_spec

    loaded = load_spec(spec_file, sets)
    from rmspec.data.preview import preview_records
    from rmspec.data.tokenizer import load_tokenizer

    _quiet()

    records, rejected = preview_records(loaded, load_tokenizer(loaded), n)
    if as_json:
        click.echo(json.dumps(records, ensure_ascii=False, indent=1))
        return
    from rmspec.render.data_view import print_preview

    print_preview(records, rejected)


@data.command()
@click.argument("spec_file", type=SpecFile(training_only="data report"))
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--rejects",
    "rejects_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write every rejected row (JSONL: source_index, stage, reason, row) here.",
)
@click.option("--no-cache", is_flag=True, help="Prepare again even if a cached result matches.")
def report(spec_file: str, sets: tuple[str, ...], as_json: bool, rejects_path: str | None, no_cache: bool) -> None:
    """Prepare the data as training would and report: counts per stage and reason, token lengths, length heuristic."""
    from rmspec.spec import load_spec

    loaded = load_spec(spec_file, sets)
    import tempfile

    from rmspec.data import prepare
    from rmspec.data.tokenizer import load_tokenizer

    _quiet()

    tokenizer = load_tokenizer(loaded)
    if no_cache:
        with tempfile.TemporaryDirectory(prefix="rmspec-data-") as tmp:
            prepared = prepare(loaded, tokenizer, rejects_path=rejects_path, cache_dir=tmp)
            result = prepared.report.to_json()
    else:
        result = prepare(loaded, tokenizer, rejects_path=rejects_path).report.to_json()
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False, indent=1))
        return
    from rmspec.render.data_view import print_report

    print_report(result, rejects_path=rejects_path)
    if rejects_path:
        click.echo(f"rejects written to {rejects_path}", file=sys.stderr)


def _quiet() -> None:
    """No per-map progress bars from datasets in a command's output."""
    import datasets

    datasets.disable_progress_bars()
