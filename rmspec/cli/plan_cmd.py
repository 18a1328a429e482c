from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from rmspec.cli.options import SpecFile, SpecPath, set_option

if TYPE_CHECKING:
    from rmspec.documents.base import DocumentKind


@click.command()
@click.argument("spec_file", type=SpecFile())
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON instead of the view.")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Save the plan (with the hash of its spec) for `rmspec run PLAN`.",
)
def plan(spec_file: SpecPath, sets: tuple[str, ...], as_json: bool, out: str | None) -> None:
    """Dry run for SPEC_FILE: memory per device, strategy, batch math, precision, time, launch command.

    Never imports torch; exits 2 when nothing fits, naming what would.
    """
    from rmspec.data.column_check import check_local_columns
    from rmspec.model_check import check_models
    from rmspec.plan import compile_plan, save_plan
    from rmspec.spec import load_spec

    if not spec_file.kind.trains:  # its own plan (a composite: what each component costs)
        check_models(spec_file.kind.load(spec_file, sets), ask_hub=False)  # a tokenizer not here fails the run
        _own_plan(spec_file.kind, spec_file, sets, as_json, out)
        return
    loaded = load_spec(spec_file, sets)
    from rmspec.plan.catalog import catalog_config
    from rmspec.render.errors import print_notes

    # a mistyped folder or hub id at its line, with the names installed here, not "no shape"; a missing
    # model.init_from is a note (the first stage makes it): the rule is rmspec.model_check's
    print_notes(check_models(loaded, ask_hub=False, before_run=False, catalog=catalog_config, sizes_model=True))
    check_local_columns(loaded)  # a missing column found here, not after the run has launched
    from rmspec.evaluate.file_check import check_benchmark_files

    check_benchmark_files(loaded)  # a missing or malformed benchmark file: here, not after training
    from rmspec.vision.settings_check import check_vision

    deferred = check_vision(loaded, download=False)  # model.vision's resolution vs the folder's image processor
    if deferred:
        click.echo(deferred, err=True)
    result = compile_plan(loaded, sets=sets)
    if out:
        save_plan(result, out)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    from rmspec.render.plan_view import render_plan

    render_plan(result)
    if loaded.spec.sweep is not None:
        from rmspec.sweep.budget import render_budget

        render_budget(loaded, sets, result)
    if out:
        click.echo(f"\nsaved plan to {out}; run it with `rmspec run {out}` (refused if {spec_file} changes)")


def _own_plan(declared: DocumentKind, spec_file: str, sets: tuple[str, ...], as_json: bool, out: str | None) -> None:
    from rmspec.errors import RmspecError

    if out:
        raise RmspecError(
            f"approach {declared.name} trains nothing: there is no plan to save",
            f"run it with `rmspec run {spec_file}`",
        )
    result = declared.hook("planner")(declared.load(spec_file, sets))
    click.echo(json.dumps(result, indent=2) if as_json else "\n".join(declared.hook("plan_view")(result)))
