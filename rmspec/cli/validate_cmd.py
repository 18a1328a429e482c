from __future__ import annotations

import click

from rmspec.cli.options import set_option


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
@set_option
@click.option("--all", "show_all", is_flag=True, help="Show every problem (by default the first 50).")
def validate(spec_file: str, sets: tuple[str, ...], show_all: bool) -> None:
    """Check SPEC_FILE: every problem at once, each with FILE:LINE:COL and field path."""
    from rmspec.cli.documents import own_document
    from rmspec.errors import SpecError
    from rmspec.spec import load_spec

    try:
        declared = own_document(spec_file)
        if declared is not None:  # an approach that trains nothing reads a document of its own (composite)
            click.echo(f"{spec_file}: valid ({declared.summary(declared.load_document(spec_file, sets))})")
            return
        loaded = load_spec(spec_file, sets)
    except SpecError as exc:
        exc.show_all = show_all  # read by rmspec.render.errors.print_error
        raise
    s = loaded.spec
    if s.data.sources:
        data = ", ".join(
            f"{e.name}: {e.source.kind}" + (f" x {e.weight:g}" if e.weight is not None else "") for e in s.data.sources
        )
    else:
        assert s.data.source is not None  # DataSpec._one_form: no sources means one source
        data = s.data.source.kind
    click.echo(f"{spec_file}: valid ({s.approach.kind}, model {s.model.name_or_path}, data {data})")
