from __future__ import annotations

import json

import click

from rmspec.cli.options import set_option


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON instead of the view.")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Save the plan (with the hash of its spec) for `rmspec run PLAN`.",
)
def plan(spec_file: str, sets: tuple[str, ...], as_json: bool, out: str | None) -> None:
    """Dry run for SPEC_FILE: memory per device, strategy, batch math, precision, time, launch command.

    Never imports torch; exits 2 when nothing fits, naming what would.
    """
    from rmspec.plan import compile_plan, save_plan
    from rmspec.spec import load_spec
    from rmspec.spec.composite_spec import is_composite_spec

    if is_composite_spec(spec_file):  # trains nothing: what each component costs (rmspec.composite.plan)
        _composite_plan(spec_file, sets, as_json, out)
        return
    loaded = load_spec(spec_file, sets)
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


def _composite_plan(spec_file: str, sets: tuple[str, ...], as_json: bool, out: str | None) -> None:
    from rmspec.composite.plan import composite_plan, render_composite_plan
    from rmspec.errors import RmspecError
    from rmspec.spec.composite_spec import load_composite_spec

    if out:
        raise RmspecError(
            "a composite trains nothing: there is no plan to save", f"run it with `rmspec run {spec_file}`"
        )
    result = composite_plan(load_composite_spec(spec_file, sets))
    click.echo(json.dumps(result, indent=2) if as_json else "\n".join(render_composite_plan(result)))
