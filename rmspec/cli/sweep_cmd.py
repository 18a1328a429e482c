"""`rmspec sweep SPEC [-o DIR] [--set ...]` and `rmspec sweep --resume DIR`.

Parses options and renders the outcome; the search lives in rmspec.sweep (Optuna is imported only here,
when the command runs). The parent stays light: each trial trains in its own `rmspec run`.
"""

from __future__ import annotations

import click

from rmspec.cli.options import SpecFile, set_option
from rmspec.errors import RmspecError


@click.command()
@click.argument("spec_file", required=False, type=SpecFile(training_only="sweep"))
@set_option
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(file_okay=False),
    default=None,
    help="Sweep directory (default: the spec's sweep.dir, sweeps/{name}).",
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Continue the sweep in DIR: finished trials stay, an interrupted one is finished, then on to the budget.",
)
@click.option(
    "--join",
    is_flag=True,
    help="Work on the sweep in -o DIR together with other `rmspec sweep SPEC -o DIR --join` processes (any node "
    "sharing DIR): the first creates it, each takes new trials and adopts those of a worker that died. Needs "
    "sweep.storage journal or an RDB URL.",
)
def sweep(spec_file: str | None, sets: tuple[str, ...], out: str | None, resume_dir: str | None, join: bool) -> None:
    """Search the spec's `sweep:` space: each trial is an ordinary run in DIR/trials/NNN.

    Writes the study (DIR/study.db, DIR/study.journal or the RDB sweep.storage names), DIR/sweep.json,
    DIR/best.yaml and DIR/report.html.
    """
    try:
        from rmspec.sweep import driver, opening, outputs
    except ImportError as exc:
        raise RmspecError(f"rmspec sweep needs Optuna ({exc})", hint="pip install 'rmspec[sweep]'") from None
    if resume_dir is not None:
        if spec_file or sets or out or join:
            raise RmspecError(
                "--resume continues a sweep as it started: give no SPEC, --set, -o or --join with it",
                hint=f"rmspec sweep --resume {resume_dir}",
            )
        state, lock = opening.resume(resume_dir)
    else:
        if spec_file is None:
            raise RmspecError("give a spec with a sweep: section", hint="e.g. rmspec sweep sweep.yaml -o sweeps/lr")
        state, lock = opening.start(spec_file, sets, out, join=join)
    try:
        try:
            driver.run_sweep(state)
        except KeyboardInterrupt:
            outputs.write_sweep_json(state)
            driver.exit_interrupted(state)
        outputs.finish(state)
    finally:
        lock.release()
    _summary(state)


def _summary(state) -> None:
    from rmspec.sweep.outputs import best_trial

    best = best_trial(state.study)
    root = state.dir.root
    if best is None:
        click.echo(f"no trial completed; see {root / 'sweep.json'} for each trial's error", err=True)
        raise SystemExit(1)
    click.echo(
        f"best: trial {best.number}, {state.spec.objective.metric} = {best.value:.6g} "
        f"({', '.join(f'{k}={v}' for k, v in best.user_attrs.get('values', {}).items())})"
    )
    click.echo(f"best spec: {state.dir.best_yaml}  (rmspec run {state.dir.best_yaml})")
    click.echo(f"report: {state.dir.report_html}   trials: rmspec compare {root}")
    from rmspec.sweep.storage import how_to_open

    click.echo(f"study: {how_to_open(state.dir, state.storage, state.loaded.spec.name)}")
