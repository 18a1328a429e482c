from __future__ import annotations

import json
from pathlib import Path

import click

from rmspec.scaffold.shipped import SCHEMA as DEFAULT_SCHEMA  # the packaged copy (in a checkout: schemas/)


def schema_text() -> str:
    from rmspec.spec import Spec

    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://rmspec.dev/schemas/rmspec.schema.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


@click.command()
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_SCHEMA,
    show_default=True,
    help="Where the JSON Schema goes.",
)
@click.option("--check", is_flag=True, help="Fail (exit 1) if the file differs from the models instead of writing it.")
@click.option("--print", "to_stdout", is_flag=True, help="Write the schema to stdout instead of a file.")
def schema(out: Path, check: bool, to_stdout: bool) -> None:
    """Export the spec's JSON Schema (editors use it to complete and check specs).

    `rmspec init` names the packaged copy in each spec's first line; `rmspec schema --print >
    FILE` keeps one beside your specs.
    """
    text = schema_text()
    if to_stdout:
        if check:
            raise click.UsageError("--print and --check do not go together: --check compares --out with the models")
        click.echo(text, nl=False)
        return
    if check:
        current = out.read_text(encoding="utf-8") if out.exists() else None
        if current != text:
            raise click.ClickException(f"{out} is stale: run `rmspec schema` and commit the result")
        click.echo(f"{out} is up to date")
        return
    from rmspec.rundir import atomic_write_text

    atomic_write_text(out, text)
    click.echo(f"wrote {out}")
