from __future__ import annotations

import click

from rmspec.cli.options import SpecFile, SpecPath, set_option


@click.command()
@click.argument("spec_file", type=SpecFile())
@set_option
@click.option("--all", "show_all", is_flag=True, help="Show every problem (by default the first 50).")
def validate(spec_file: SpecPath, sets: tuple[str, ...], show_all: bool) -> None:
    """Check SPEC_FILE: every problem at once, each with FILE:LINE:COL and field path."""
    from rmspec.errors import SpecError

    kind = spec_file.kind  # the training spec, or a document of its own (a composite)
    try:
        loaded = kind.load(spec_file, sets)
    except SpecError as exc:
        exc.show_all = show_all  # read by rmspec.render.errors.print_error
        raise
    click.echo(f"{spec_file}: valid ({kind.summary(loaded)})")
