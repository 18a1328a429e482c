"""The run-directory steps every launch shares (local or SLURM): plan it, claim it, write it.

Light (no torch): the parent `rmspec run` stays fast and reaches training only through a
subprocess (`accelerate launch`) or a SLURM job.
"""

from __future__ import annotations

import io
import platform
import shutil
import sys
from importlib import metadata
from pathlib import Path

from rmspec.errors import RmspecError
from rmspec.launch.next_step import input_failed, next_step
from rmspec.plan import Plan, read_plan
from rmspec.rundir import LOCK_FILES, RunDir, atomic_write_json, atomic_write_text, read_status
from rmspec.rundir.lock import Lock, RunLocked, claim_lock

PACKAGES = (
    "rmspec",
    "torch",
    "transformers",
    "accelerate",
    "datasets",
    "peft",
    "huggingface_hub",
    "safetensors",
    "tokenizers",
    "trl",
    "pydantic",
)


def plan_and_document(target: str, sets: tuple[str, ...]) -> tuple[Plan, dict]:
    """The plan of a spec (compiled with --set) or of a saved plan, and the spec document as run."""
    from rmspec.plan import compile_plan
    from rmspec.spec import load_spec

    if target.endswith(".json"):
        if sets:
            raise RmspecError(
                "a saved plan runs as it was planned: --set does not apply to PLAN.json",
                hint="plan again with the overrides: rmspec plan SPEC --set ... --out plan.json",
            )
        plan = read_plan(target)  # refuses a plan whose spec changed since
        loaded = load_spec(plan.spec_path, plan.sets)
        return plan, loaded.document
    loaded = load_spec(target, sets)
    return compile_plan(loaded, sets=list(sets)), loaded.document


def plan_of_run(run_dir: RunDir) -> Plan:
    """The plan of a run to resume (its own copy, run as it was planned), unless the run is over."""
    if not run_dir.plan.exists():
        raise RmspecError(f"{run_dir.root} holds no run (no plan.json)", hint="give the run directory rmspec run wrote")
    if read_status(run_dir).state == "completed":
        raise RmspecError(f"the run in {run_dir.root} has already completed", hint=f"its model is in {run_dir.model}")
    return read_plan(run_dir.plan, check_spec=False)


def _contents(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.name not in LOCK_FILES] if root.exists() else []


def claim(run_dir: RunDir, *, overwrite: bool = False, resume: bool = False) -> Lock:
    """Own the run directory for this `rmspec run`, or refuse: a live owner (a parent still starting,
    a trainer, a queued or running SLURM job), or a run already there without --resume/--overwrite.
    The returned lock is held until this process exits (or release())."""
    root = run_dir.root
    if resume and not root.is_dir():
        raise RmspecError(f"{root} is not a run directory", hint="give the run directory rmspec run wrote")
    command = "rmspec run --resume" if resume else "rmspec run --overwrite" if overwrite else "rmspec run"
    root.mkdir(parents=True, exist_ok=True)
    lock = claim_lock(root, command)
    try:
        _refuse_live_job(run_dir)
        if resume:
            return lock
        if _contents(root) and not overwrite:
            status = read_status(run_dir)
            state = status.get("state", "unknown")
            if input_failed(status):  # resuming would repeat the failure (rmspec.launch.next_step)
                first = f"{next_step(root, status)}, "
            else:
                first = f"resume it with `rmspec run --resume {root}`, start afresh with --overwrite, "
            raise RmspecError(
                f"{root} already holds a run (state: {state})",
                hint=first + "or give this run another name (--set name=...) or output.dir",
            )
        for path in _contents(root):  # the lock files stay: a new file would be a new, unheld lock
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    except BaseException:
        lock.release()
        raise
    return lock


def _refuse_live_job(run_dir: RunDir) -> None:
    """A SLURM job of this run that is queued or running owns it, wherever its nodes are."""
    from rmspec.launch.slurm import ALIVE, job_state

    job = read_status(run_dir).slurm_job_id
    if not job:
        return
    state = job_state(str(job))
    if state in ALIVE:
        raise RunLocked(
            f"{run_dir.root} is in use by SLURM job {job} ({state})",
            hint=f"follow it with `rmspec status {run_dir.root}`, wait for it to end, or cancel it "
            f"(scancel {job}) and then `rmspec run --resume {run_dir.root}`",
        )


def write_run_dir(run_dir: RunDir, plan: Plan, document: dict) -> None:
    from ruamel.yaml import YAML

    from rmspec.plan import write_launch_files

    run_dir.root.mkdir(parents=True, exist_ok=True)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    out.write(f"# The spec as run (from {plan.spec_path}, --set applied).\n")
    # extends: is merged into the document already; kept, it would name a base relative to the run directory
    yaml.dump({k: v for k, v in document.items() if k != "extends"}, out)
    atomic_write_text(run_dir.spec, out.getvalue())
    write_launch_files(plan)  # plan.json, accelerate_config.yaml, launch.slurm for several nodes
    atomic_write_json(run_dir.versions, versions())


def versions() -> dict:
    """Resolved package versions, read from metadata (nothing is imported)."""
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return {"python": sys.version.split()[0], "platform": platform.platform(), "packages": found}


def tail(path: Path, n: int) -> str:
    try:
        return "\n".join(Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
