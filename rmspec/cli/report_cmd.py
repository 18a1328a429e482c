"""`rmspec report RUN_DIR`: the console summary and report.html again, from the run's files only (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from rmspec.errors import RmspecError


@click.command()
@click.argument("run_dir", type=click.Path())
@click.option("--html/--no-html", "html", default=True, help="Rewrite RUN_DIR/report.html (default: yes).")
@click.option("--json", "as_json", is_flag=True, help="Print results.json instead of the console summary.")
def report(run_dir: str, html: bool, as_json: bool) -> None:
    """Render the report of RUN_DIR again (console summary and the single-file HTML report)."""
    path = Path(run_dir)
    if not path.is_dir():
        raise RmspecError(
            f"{run_dir}: no such run directory", "give the folder a run wrote (output.dir, e.g. runs/quickstart)"
        )
    known = ("results.json", "metrics.jsonl", "plan.json", "status.json")
    if not any((path / name).exists() for name in known):
        raise RmspecError(
            f"{run_dir} does not look like a run directory (none of {', '.join(known)})",
            "point at the folder `rmspec run` wrote",
        )
    if html:  # before the console summary: all or nothing
        from rmspec.extras import need, require

        require([need("report.html (leave it out with --no-html)", "report")])
    if as_json:
        from rmspec.evaluate.results import read_results

        click.echo(json.dumps(read_results(path / "results.json"), indent=2))
    else:
        from rmspec.render.report_view import print_run_summary

        print_run_summary(path)
    if html:
        from rmspec.evaluate.report import write_html_report

        written = write_html_report(path)
        if not as_json:
            click.echo(f"wrote {written}")
