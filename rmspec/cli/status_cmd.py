"""`rmspec status RUN_DIR [--json]`: the state of a run, local or SLURM, checked against the living.

A `running` run whose trainer is gone (no lock held, pid dead, no SLURM job queued or running)
shows as stopped, with the checkpoint a resume starts from. Light: no torch.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from rmspec.errors import RmspecError


@click.command()
@click.argument("run_dir", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the state as JSON.")
def status(run_dir: str, as_json: bool) -> None:
    """Show the state of the run in RUN_DIR: live or stopped, step, last checkpoint, SLURM job."""
    from rmspec.launch.status import run_status

    root = Path(run_dir)
    if not root.is_dir() or not any((root / name).exists() for name in ("plan.json", "status.json")):
        raise RmspecError(
            f"{run_dir} is not a run directory (no plan.json or status.json)",
            hint="give the folder `rmspec run` wrote (output.dir, e.g. runs/quickstart)",
        )
    info = run_status(root)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    for label, value in _lines(info):
        click.echo(f"{label:<16}{value}")


def _lines(info: dict) -> list[tuple[str, str]]:
    state = info["state"]
    if state != info["recorded_state"]:
        state += f" (status.json says {info['recorded_state']}, but its trainer is gone)"
    elif info.get("live") is None and info["recorded_state"] == "running":
        state += " (on another host: cannot check from here)"
    rows = [("run", info["run_dir"]), ("state", state)]
    owner = info.get("owner")
    if owner:
        rows.append(("owner", f"pid {owner.get('pid')} on {owner.get('host')}"))
    elif info.get("pid") is not None:
        rows.append(("last pid", f"{info['pid']} on {info.get('host', '?')}"))
    if info.get("slurm_job_id"):
        restarts = info.get("slurm_restart_count")
        rows.append(
            (
                "SLURM job",
                f"{info['slurm_job_id']}: {info.get('slurm_state') or 'unknown to squeue/sacct'}"
                + (f" (restarts {restarts})" if restarts else ""),
            )
        )
    if info.get("step") is not None:
        rows.append(("step", f"{info['step']}/{info.get('max_steps', '?')}"))
    if info.get("world_size"):
        rows.append(("processes", str(info["world_size"])))
    rows.append(("last checkpoint", info.get("last_checkpoint") or "none"))
    if info.get("updated"):
        rows.append(("updated", f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['updated']))}"))
    if info.get("error"):
        rows.append(("error", str(info["error"]).splitlines()[0]))
    if info["state"] == "completed" and info.get("model_dir"):
        rows.append(("model", str(info["model_dir"])))
    if info["state"] in ("stopped", "interrupted", "failed"):
        from rmspec.launch.next_step import next_step

        # a run failed by its spec or data is fixed and started afresh: --resume would fail the same way
        rows.append(("next", next_step(Path(info["run_dir"]), info, submit=bool(info.get("slurm_job_id")))))
    return rows
