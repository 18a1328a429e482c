"""`rmspec export RUN --to verl|openrlhf -o FILE`: the thin file an RL trainer imports to use a run.

The run's approach picks its exporter (EXPORTERS: approach kind -> "module:function(run, target,
out) -> path"); a composite run (RUN/reward.yaml) exports a client of `rmspec serve RUN`. Only
the chosen exporter's module is imported.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import click

from rmspec.errors import RmspecError

TARGETS = ("verl", "openrlhf")
# approach kind -> (exporter, the targets it writes)
EXPORTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "composite": ("rmspec.composite.export:export_composite", ("verl", "openrlhf")),
}


def run_approach(run: Path) -> str:
    """The approach kind of a run directory (a composite is known by its reward.yaml)."""
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
@click.argument("run", type=click.Path(file_okay=False))
@click.option("--to", "target", type=click.Choice(TARGETS), required=True, help="The RL trainer the file is for.")
@click.option(
    "-o", "--out", "out", type=click.Path(dir_okay=False), required=True, help="The Python file to write (FILE.py)."
)
@click.option("--overwrite", is_flag=True, help="Replace an existing FILE.")
def export(run: str, target: str, out: str, overwrite: bool) -> None:
    """Write the file TRAINER imports to call `rmspec serve RUN` (URL and token from RMSPEC_REWARD_URL, RMSPEC_REWARD_TOKEN)."""
    folder, path = Path(run), Path(out)
    if not folder.is_dir():
        raise RmspecError(f"{run}: no such run directory", "give the directory `rmspec run` wrote (runs/NAME)")
    if path.suffix != ".py":
        raise RmspecError(f"-o {out}: the trainer imports a Python file", "name it FILE.py")
    if path.exists() and not overwrite:
        raise RmspecError(f"{out} already exists", "pass --overwrite to replace it, or choose another -o")
    kind = run_approach(folder)
    if kind not in EXPORTERS:
        raise RmspecError(
            f"{run}: approach {kind!r} has no exporter (exportable: {', '.join(EXPORTERS)})",
            "serve the model with `rmspec serve RUN` and use the trainer's HTTP reward-model client instead",
        )
    exporter, targets = EXPORTERS[kind]
    if target not in targets:
        raise RmspecError(f"approach {kind!r} exports to {', '.join(targets)}, not {target}", f"use --to {targets[0]}")
    module, _, function = exporter.partition(":")
    written = getattr(importlib.import_module(module), function)(folder, target, path)
    click.echo(f"wrote {written} ({target}); start the server with: rmspec serve {folder}", err=True)
