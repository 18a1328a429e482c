"""`rmspec export RUN --to verl|openrlhf -o FILE|DIR`: what an RL trainer needs to use a run.

The run's approach picks its exporter (EXPORTERS: approach kind -> "module:function(run, target,
out) -> path"); a composite run (RUN/reward.yaml) exports a client of `rmspec serve RUN` (one
Python file); a judge trained by GRPO (a run or its spec) exports its training for verl (a
directory: Parquet data, compute_score.py, the main_ppo command). Only the chosen exporter's
module is imported.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import click

from rmspec.errors import RmspecError

TARGETS = ("verl", "openrlhf")
# approach kind -> (exporter, the targets it writes, what -o names: a Python file or a directory)
EXPORTERS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "composite": ("rmspec.composite.export:export_composite", ("verl", "openrlhf"), "file"),
    "generative": ("rmspec.train.judge_export:export_judge", ("verl",), "dir"),
}


def run_approach(run: Path) -> str:
    """The approach kind of a run directory (a composite is known by its reward.yaml) or a spec file."""
    if run.is_file():
        from rmspec.spec import load_spec

        return str(load_spec(run).spec.approach.kind)
    if (run / "reward.yaml").is_file():
        return "composite"
    if not (run / "spec.yaml").is_file():
        raise RmspecError(
            f"{run}: not a run directory (no spec.yaml or reward.yaml)", "give the directory `rmspec run` wrote"
        )
    from rmspec.rundir.spec import load_run_spec

    approach: Any = load_run_spec(run).spec.approach
    return str(approach.kind)


@click.command("export")
@click.argument("run", type=click.Path())
@click.option("--to", "target", type=click.Choice(TARGETS), required=True, help="The RL trainer the file is for.")
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(),
    required=True,
    help="What to write: FILE.py (a composite's client) or DIR (a GRPO judge's data, reward and verl command).",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing FILE.")
def export(run: str, target: str, out: str, overwrite: bool) -> None:
    """Write the file TRAINER imports to call `rmspec serve RUN` (URL and token from RMSPEC_REWARD_URL, RMSPEC_REWARD_TOKEN)."""
    folder, path = Path(run), Path(out)
    if not folder.exists():
        raise RmspecError(f"{run}: no such run directory or spec", "give the directory `rmspec run` wrote (runs/NAME)")
    if path.exists() and not overwrite:
        raise RmspecError(f"{out} already exists", "pass --overwrite to replace it, or choose another -o")
    kind = run_approach(folder)
    if kind not in EXPORTERS:
        raise RmspecError(
            f"{run}: approach {kind!r} has no exporter (exportable: {', '.join(EXPORTERS)})",
            "serve the model with `rmspec serve RUN` and use the trainer's HTTP reward-model client instead",
        )
    exporter, targets, writes = EXPORTERS[kind]
    if target not in targets:
        raise RmspecError(f"approach {kind!r} exports to {', '.join(targets)}, not {target}", f"use --to {targets[0]}")
    if writes == "file" and path.suffix != ".py":
        raise RmspecError(f"-o {out}: the trainer imports a Python file", "name it FILE.py")
    if writes == "dir" and path.suffix:
        raise RmspecError(
            f"-o {out}: approach {kind} writes a directory (Parquet, compute_score.py, the command)",
            "name a directory, e.g. -o verl_export",
        )
    if writes == "file" and folder.is_file():
        raise RmspecError(f"{run}: approach {kind} exports a run, not a spec", "run it first, then export runs/NAME")
    module, _, function = exporter.partition(":")
    written = getattr(importlib.import_module(module), function)(folder, target, path)
    if writes == "file":
        click.echo(f"wrote {written} ({target}); start the server with: rmspec serve {folder}", err=True)
    else:
        click.echo(
            f"wrote {written} ({target}): train.parquet, validation.parquet, compute_score.py; run: {written}/train_verl.sh",
            err=True,
        )
