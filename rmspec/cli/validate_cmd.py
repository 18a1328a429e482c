from __future__ import annotations

import click

from rmspec.cli.options import SpecFile, SpecPath, set_option


@click.command()
@click.argument("spec_file", type=SpecFile())
@set_option
@click.option("--all", "show_all", is_flag=True, help="Show every problem (by default the first 50).")
@click.option(
    "--check-paths",
    is_flag=True,
    help="Also ask the hub for every model and tokenizer the spec names that is neither a local folder nor "
    "cached (one short request each, none with HF_HUB_OFFLINE=1).",
)
def validate(spec_file: SpecPath, sets: tuple[str, ...], show_all: bool, check_paths: bool) -> None:
    """Check SPEC_FILE: every problem at once, each with FILE:LINE:COL and field path."""
    from rmspec.data.column_check import check_local_columns
    from rmspec.errors import SpecError
    from rmspec.model_check import check_models
    from rmspec.plan.catalog import catalog_config
    from rmspec.render.errors import print_notes

    kind = spec_file.kind  # the training spec, or a document of its own (a composite)
    try:
        loaded = kind.load(spec_file, sets)
        # a mistyped model folder always; a hub id where offline tells (the rule: rmspec.model_check)
        notes = check_models(loaded, ask_hub=check_paths, before_run=False, catalog=catalog_config)
    except SpecError as exc:
        exc.show_all = show_all  # read by rmspec.render.errors.print_error
        raise
    if kind.trains:  # the mapping's columns against local files, read cheaply (not the hub, not SQL)
        check_local_columns(loaded)
        from rmspec.evaluate.file_check import check_benchmark_files

        check_benchmark_files(loaded)  # a missing or malformed benchmark file: here, not after training
    print_notes(notes)
    click.echo(f"{spec_file}: valid ({kind.summary(loaded)})")
