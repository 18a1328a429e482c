from __future__ import annotations

import sys
from pathlib import Path

import click

from rmspec.scaffold import APPROACHES, OWN_DOCUMENTS, data_names, example_names
from rmspec.scaffold.built import BUILT_EXAMPLES
from rmspec.spec.data import PRESETS


def _ask(approach: str | None, data: str | None, model: str | None, out: Path | None):
    from rich.prompt import Prompt

    if not approach:
        approach = Prompt.ask("Approach", choices=list(APPROACHES), default="bradley_terry")
    from rmspec import approaches

    if OWN_DOCUMENTS.get(approach) is None:  # a document of its own (a composite) names its rows and models inside
        data = data or Prompt.ask(
            f"Data (a name: {', '.join(data_names())}; a hub dataset id; or a file path)",
            default=approaches.get(approach).demo_data,
        )
        model = model or Prompt.ask("Model (hub id or local path; empty keeps the template's)", default="") or None
    out = out or Path(Prompt.ask("Write the spec to", default="spec.yaml"))
    return approach, data, model, out


@click.command()
@click.option("--approach", type=click.Choice(APPROACHES), help="How the reward model learns.")
@click.option(
    "--data",
    "data",
    metavar="NAME_ID_OR_PATH",
    help=f"A dataset or mapping preset ({', '.join(data_names())}), a hub dataset id (org/name) "
    "or a local .jsonl/.json/.parquet/.csv file.",
)
@click.option(
    "--preset",
    metavar="PRESET",
    help=f"How a --data hub id or file is laid out ({', '.join(PRESETS)}); default: the approach's usual one.",
)
@click.option(
    "--example",
    metavar="NAME",
    help="Write a shipped example spec instead of a template "
    f"({', '.join(sorted([*example_names(), *BUILT_EXAMPLES]))}; multimodal also builds its data and tiny model "
    "in a folder named after the spec).",
)
@click.option("--model", metavar="ID_OR_PATH", help="Hub id or local model directory.")
@click.option("--name", help="Run name (default: the template's).")
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Spec file to write (with --example: NAME.yaml here by default).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(approach, data, preset, example, model, name, out, force) -> None:
    """Write a commented spec; the comments are the field descriptions.

    Without flags on a terminal it asks; otherwise give --approach and -o, or --example NAME.
    Paths to files that ship with rmspec (demo data, the JSON Schema in the first line) are
    written absolute, so the spec works wherever it is written.
    """
    from rmspec import documents
    from rmspec.errors import RmspecError
    from rmspec.rundir import atomic_write_text
    from rmspec.scaffold import build_document, example_document, render_spec
    from rmspec.spec.yaml_io import parse_yaml_text

    note = None
    if example is not None:
        if approach or data or preset:
            raise RmspecError(
                "--example writes a shipped spec as it is; it does not take --approach, --data or --preset",
                hint=f"rmspec init --example {example}, then edit the file or use --set",
            )
        out = out or Path(f"{example}.yaml")
    elif approach is None and sys.stdin.isatty():
        approach, data, model, out = _ask(approach, data, model, out)
    if example is None and (approach is None or out is None):
        raise RmspecError(
            "rmspec init needs --approach and -o FILE (or --example NAME) when not run on a terminal",
            hint="e.g. rmspec init --approach bradley_terry -o spec.yaml, or rmspec init --example quickstart",
        )
    if out.exists() and not force:
        raise RmspecError(f"{out} exists", hint="pick another -o path or add --force")
    out_dir = out.parent if str(out.parent) else Path(".")
    if example in BUILT_EXAMPLES:  # its files are built by a subprocess (torch); the spec is checked here
        from rmspec.scaffold.built import build_example

        folder = build_example(example, out, model, name)
        parsed, locs = parse_yaml_text(out.read_text(encoding="utf-8"), str(out))
        documents.of_document(parsed).check(parsed, locs, out)
        click.echo(
            f"wrote {out} and {folder}/ ({example}); next: rmspec plan {out}, then OMP_NUM_THREADS=1 rmspec run {out}"
        )
        return
    if example is not None:
        doc = example_document(example, model, name)
    else:
        doc, note = build_document(approach, data, model, out_dir, name, preset)
    kind = documents.of_document(doc)  # the training spec, or a document of its own (a composite)
    text = render_spec(doc, kind.document)
    # What we write must validate as written: parse the text back and check it.
    parsed, locs = parse_yaml_text(text, str(out))
    kind.check(parsed, locs, out)
    atomic_write_text(out, text)
    if note:
        click.echo(f"note: {note}", err=True)
    click.echo(
        f"wrote {out} ({example or approach}); next: rmspec validate {out} && rmspec plan {out}"
        + (f", then rmspec run {out}" if example else "")
    )
