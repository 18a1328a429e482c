"""`rmspec run SPEC|PLAN [--set ...] [--resume RUN_DIR] [--overwrite] [--submit]`.

Parses options and renders outcomes; the launch itself lives in rmspec.launch (prepare: plan,
claim and write the run directory; local: accelerate launch here; slurm: submit and follow).
The parent stays light (no torch). Ctrl-C asks the training processes to save a checkpoint and
stop; `--resume RUN_DIR` continues from it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rmspec.cli.options import SpecFile, SpecPath, set_option
from rmspec.errors import PlanError, RmspecError, RunError

if TYPE_CHECKING:
    from rmspec.documents.base import DocumentKind
    from rmspec.plan import Plan
    from rmspec.rundir import Status


@click.command()
@click.argument("target", required=False, type=SpecFile())
@set_option
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Continue the run in RUN_DIR from its last checkpoint.",
)
@click.option("--overwrite", is_flag=True, help="Start afresh in a run directory that already holds a run.")
@click.option(
    "--submit",
    is_flag=True,
    help="Several nodes: submit launch.slurm with sbatch and follow the job (default: print the command).",
)
def run(target: SpecPath | None, sets: tuple[str, ...], resume_dir: str | None, overwrite: bool, submit: bool) -> None:
    """Train from a spec (SPEC.yaml) or a saved plan (PLAN.json), then evaluate and report."""
    from rmspec.launch import prepare
    from rmspec.rundir import RunDir, load_run_spec
    from rmspec.spec import load_spec

    if resume_dir is not None:
        if target or sets or overwrite:
            raise RmspecError(
                "--resume continues a run exactly as planned: give no SPEC, PLAN, --set or --overwrite with it",
                hint=f"rmspec run --resume {resume_dir}",
            )
        run_dir = RunDir(Path(resume_dir))
        lock = prepare.claim(run_dir, resume=True)  # refuses while a trainer or a SLURM job owns it
        try:
            plan = prepare.plan_of_run(run_dir)
            _check_submit(plan, submit)
            _require_extras(load_run_spec(run_dir).spec)
            _preflight(plan)
        except BaseException:
            lock.release()
            raise
    else:
        if target is None:
            raise RmspecError(
                "give a spec (SPEC.yaml) or a plan (PLAN.json) to run",
                hint="e.g. rmspec init --example quickstart, then rmspec run quickstart.yaml",
            )
        from rmspec.model_check import check_models

        if not target.kind.trains:  # a document that trains nothing (a composite): its own run, here
            check_models(target.kind.load(target, sets), ask_hub=True)  # seconds, not transformers' retries
            _run_own(target.kind, target, sets, overwrite, submit)
            return
        if not str(target).endswith(".json"):  # a spec (a saved plan was checked when it was made)
            from rmspec.data.column_check import check_local_columns

            loaded = load_spec(target, sets)
            # A missing extra first: a packaged model whose package is absent is named by its extra
            # (rmspec[demo]), not reported as a hub model to download.
            _require_extras(loaded.spec)
            check_models(loaded, ask_hub=True)  # before the run directory is touched
            check_local_columns(loaded)
            from rmspec.evaluate.file_check import check_benchmark_files

            check_benchmark_files(loaded)  # a missing or malformed benchmark file: here, not after training
            from rmspec.vision.settings_check import check_vision

            check_vision(loaded, download=True)  # a hub model's config files are fetched for it
        plan, document = prepare.plan_and_document(target, sets)
        if document.get("sweep") is not None:
            raise RmspecError(
                f"{target} has a sweep: section: a search over many runs, which rmspec run does not do",
                hint=f"run the search with `rmspec sweep {target}`, or one run of it with --set sweep=null",
            )
        run_dir = RunDir(Path(plan.run_dir))
        _check_submit(plan, submit)
        _require_extras(load_spec(plan.spec_path, plan.sets).spec)
        _preflight(plan)  # before the run directory is touched
        lock = prepare.claim(run_dir, overwrite=overwrite)
        prepare.write_run_dir(run_dir, plan, document)

    from rmspec.cli import main as cli_main

    cli_main.crash_report_dir = str(run_dir.root)  # an internal error's traceback lands beside the run
    try:
        if plan.multi_node:
            _several_nodes(run_dir, plan, submit)
            return
        from rmspec.launch.local import launch

        code = launch(run_dir, plan, resume=resume_dir is not None)
    finally:
        lock.release()
    conclude(run_dir, code)


def _run_own(declared: DocumentKind, target: str, sets: tuple[str, ...], overwrite: bool, submit: bool) -> None:
    if submit:
        raise RmspecError(f"approach {declared.name} trains nothing: there is no job to submit", f"rmspec run {target}")
    say = lambda message: click.echo(message, err=True)  # noqa: E731
    from rmspec.cli.extras_check import require_for_own_spec

    loaded = declared.load(target, sets)
    require_for_own_spec(loaded.spec)  # before the run directory is touched, as a training run's
    run_dir = declared.hook("runner")(loaded, overwrite=overwrite, progress=say)
    from rmspec.render.composite_view import print_composite_summary
    from rmspec.rundir.results import read_results

    print_composite_summary(str(run_dir), read_results(run_dir / "results.json"))  # as a trained run prints its own
    say(f"results: {run_dir / 'results.json'}")
    say(f"use it: rmspec score {run_dir} FILE, rmspec serve {run_dir}, rmspec export {run_dir} --to verl|openrlhf")


def _check_submit(plan: Plan, submit: bool) -> None:
    if submit and not plan.multi_node:
        raise RmspecError(
            "--submit hands a plan on several nodes to SLURM; this plan runs on one machine",
            hint="run it here without --submit, or plan for several nodes: --set hardware.nodes=2",
        )


def _require_extras(spec) -> None:
    """Optional packages the run imports (the report's matplotlib, peft for LoRA, ...): missing ones stop it
    here, before the run directory is touched or a process starts, not after training."""
    from rmspec.extras import require_for_spec

    require_for_spec(spec)


def _preflight(plan: Plan) -> None:
    """This machine must be able to run the plan; several nodes are checked by SLURM, not here."""
    cp = plan.context_parallel or {}
    if cp and "run_refused" not in cp:  # a plan.json from before training was wired: its batch math differs
        raise PlanError(
            f"hardware.context_parallel {cp['degree']}: this plan was made by an rmspec that only planned it",
            hint="plan it again (`rmspec run SPEC`, or `rmspec plan SPEC --out plan.json`)",
        )
    if cp.get("run_refused"):  # sized by the plan, not wired in the trainer (rmspec.plan.context_parallel.run_refusal)
        raise PlanError(
            f"hardware.context_parallel {cp['degree']} is planned only for this spec: {cp['run_refused']}",
            hint="run with hardware.context_parallel: 1, or use `rmspec plan` to size a long-context run",
        )
    if not plan.multi_node:
        from rmspec.launch.preflight import preflight

        preflight(plan)


def _several_nodes(run_dir, plan: Plan, submit: bool) -> None:
    """Several nodes: the plan's SLURM script starts `accelerate launch` on each node; the run directory
    (on a shared filesystem) is written by the job as by a local run."""
    script = run_dir.root / "launch.slurm"  # written with the plan by write_launch_files
    if not submit:
        command = shlex.join(plan.submit_command or ["sbatch", str(script)])
        click.echo(
            f"{plan.num_machines} nodes: submit the job with\n  {command}\n"
            f"(or run again with --submit), from this folder: the script's paths are relative to it.\n"
            f"It writes {run_dir.root} (metrics.jsonl, checkpoints, model); `rmspec status {run_dir.root}` "
            "shows its state; a requeued job resumes from the last checkpoint."
        )
        return
    from rmspec.launch.slurm import follow
    from rmspec.launch.slurm import submit as sbatch

    job = sbatch(run_dir, plan)
    click.echo(f"submitted SLURM job {job}")
    state = follow(run_dir, plan, job)
    if state == "FOLLOW_STOPPED":
        sys.exit(130)
    conclude(run_dir, 0 if state == "COMPLETED" else 1, job_state=state)


# ------------------------------------------------------------------ the outcome


def conclude(run_dir, code: int, job_state: str | None = None) -> None:
    from rmspec.launch.next_step import input_failed, next_step
    from rmspec.launch.prepare import tail
    from rmspec.rundir import read_status

    status = read_status(run_dir)
    state = status.state
    if state == "completed":
        _print_summary(run_dir, status)
        if status.push_error:
            raise RunError(status.push_error)
        return
    if state == "interrupted":
        click.echo(f"interrupted at step {status.get('step', '?')}; checkpoint {status.checkpoint}", err=True)
        click.echo(f"resume with: rmspec run --resume {run_dir.root}", err=True)
        sys.exit(130)
    if input_failed(status):
        # A mistake in the input found by the child (data that cannot be read or mapped): exit 2. Resuming
        # would reuse the saved spec and data: the advice is to fix them and start afresh.
        advice = next_step(run_dir.root, status)
        raise RmspecError(status.error or "the run failed", hint=f"{status.hint}; {advice}" if status.hint else advice)
    job = status.slurm_job_id
    log = run_dir.root / (f"slurm-{job}.out" if job_state is not None and job else "train.log")
    error = status.error or (
        f"SLURM job {job} ended {job_state or 'without a state'}"
        if job_state is not None
        else f"the training process exited with code {code}"
    )
    raise RunError(
        f"the run failed: {error}\n--- last lines of {log} ---\n{tail(log, 30)}",
        hint=f"fix the cause, then `rmspec run --resume {run_dir.root}"
        f"{' --submit' if job_state is not None else ''}` continues from the last checkpoint",
    )


def _print_summary(run_dir, status: Status) -> None:
    from rich.table import Table

    from rmspec.render.console import make_console

    console = make_console()
    table = Table(title=f"run completed: {run_dir.root}", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in (status.metrics or {}).items():
        if isinstance(value, float):
            value = f"{value:.4f}"
        table.add_row(key, str(value))
    if status.train_seconds is not None:
        table.add_row("training time", f"{status.train_seconds:.1f} s")
    console.print(table)
    console.print(f"model: {status.model_dir}")
    if status.evaluation and status.evaluation != "done":
        console.print(f"evaluation: {status.evaluation}")
    if run_dir.results.exists() and _console_report(run_dir):  # the evaluation's console report
        from rmspec.render.report_view import print_run_summary

        print_run_summary(run_dir.root)


def _console_report(run_dir) -> bool:
    """output.report lists console (the default): the evaluation summary is printed after the run."""
    from rmspec.rundir import load_run_spec

    try:
        return "console" in load_run_spec(run_dir).spec.output.report
    except RmspecError:  # no readable spec as run: print, as before output.report was read
        return True


__all__ = ["run", "conclude", "PlanError"]
