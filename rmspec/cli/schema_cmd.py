from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import click

from rmspec.scaffold.shipped import SCHEMA as DEFAULT_SCHEMA  # the packaged copy (in a checkout: schemas/)


def schema_text() -> str:
    """The training spec's schema, or, where `approach.kind` names a document kind that trains nothing
    (rmspec.documents: a composite), that document's (if/then/else on the kind, so an editor reports each
    document's own errors)."""
    from pydantic import BaseModel
    from pydantic.json_schema import models_json_schema

    from rmspec import documents
    from rmspec.spec import Spec

    own: list[tuple[str, type[BaseModel]]] = [(kind.name, kind.document) for kind in documents.own_kinds()]
    models: list[tuple[type[BaseModel], Literal["validation"]]] = [(Spec, "validation")]
    refs, schema = models_json_schema(models + [(document, "validation") for _, document in own])
    choice: dict = refs[(Spec, "validation")]
    for name, document in reversed(own):
        kind = {"properties": {"kind": {"const": name}}, "required": ["kind"]}
        choice = {
            "if": {"properties": {"approach": kind}, "required": ["approach"]},
            "then": refs[(document, "validation")],
            "else": choice,
        }
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://rmspec.dev/schemas/rmspec.schema.json",
        "title": "rmspec spec",
        "description": "An rmspec spec: the training spec (Spec), or the document of an approach that trains "
        "nothing (" + ", ".join(f"{name}: {document.__name__}" for name, document in own) + ").",
        **choice,
        **schema,
    }
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
