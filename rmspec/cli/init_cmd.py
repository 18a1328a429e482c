from __future__ import annotations

import sys
from pathlib import Path

import click

from rmspec.scaffold import APPROACHES, DATA_PRESETS


def _ask(approach: str | None, data: str | None, model: str | None, out: Path | None):
    from rich.prompt import Prompt

    approach = approach or Prompt.ask("Approach", choices=list(APPROACHES), default="bradley_terry")
    default_data = {"generative": "judge-demo", "pointwise": "helpsteer2", "process": "prm-demo"}.get(approach, "demo")
    data = data or Prompt.ask(f"Data (a preset: {', '.join(DATA_PRESETS)}; or a file path)", default=default_data)
    model = model or Prompt.ask("Model (hub id or local path; empty keeps the template's)", default="") or None
    out = out or Path(Prompt.ask("Write the spec to", default="spec.yaml"))
    return approach, data, model, out


@click.command()
@click.option("--approach", type=click.Choice(APPROACHES), help="How the reward model learns.")
@click.option("--data", "data", metavar="PRESET_OR_PATH",
              help=f"A data preset ({', '.join(DATA_PRESETS)}) or a local file.")
@click.option("--model", metavar="ID_OR_PATH", help="Hub id or local model directory.")
@click.option("--name", help="Run name (default: the template's).")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), help="Spec file to write.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(approach, data, model, name, out, force) -> None:
    """Write a commented spec; the comments are the field descriptions.

    Without flags on a terminal it asks; otherwise give --approach and -o.
    """
    from rmspec.errors import RmspecError
    from rmspec.rundir import atomic_write_text
    from rmspec.scaffold import build_document, render_spec
    from rmspec.spec import validate_document
    from rmspec.spec.yaml_io import parse_yaml_text

    if approach is None and sys.stdin.isatty():
        approach, data, model, out = _ask(approach, data, model, out)
    if approach is None or out is None:
        raise RmspecError("rmspec init needs --approach and -o FILE when not run on a terminal",
                          hint="e.g. rmspec init --approach bradley_terry -o spec.yaml")
    if out.exists() and not force:
        raise RmspecError(f"{out} exists", hint="pick another -o path or add --force")
    out_dir = out.parent if str(out.parent) else Path(".")
    doc = build_document(approach, data, model, out_dir, name)
    text = render_spec(doc, out_dir)
    # What we write must validate as written: parse the text back and check it.
    parsed, locs = parse_yaml_text(text, str(out))
    validate_document(parsed, locs)
    atomic_write_text(out, text)
    click.echo(f"wrote {out} ({approach}); next: rmspec validate {out} && rmspec plan {out}")
