"""The plan as an artifact (terraform plan -out): saved with the hash of its spec, refused once it changes.

plan.json is read and written here only: `save_plan`, `load_plan` (the checked JSON document),
`read_plan` (the typed Plan), `write_launch_files` (plan.json and what `accelerate launch` reads,
into the run directory).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.plan import SCHEMA_VERSION, Plan, as_plan
from rmspec.rundir import RunDir, atomic_write_json, atomic_write_text

__all__ = ["SCHEMA_VERSION", "Plan", "load_plan", "read_plan", "save_plan", "write_launch_files"]


def save_plan(plan: Plan | Mapping[str, Any], path: str | Path) -> Path:
    """Write a Plan, or a plan document as it is (load_plan checks a document when it is read)."""
    path = Path(path)
    atomic_write_json(path, plan.to_json() if isinstance(plan, Plan) else dict(plan))
    return path


def load_plan(path: str | Path, *, check_spec: bool = True) -> dict[str, Any]:
    """A saved plan's JSON document; refuses one whose spec file changed since (re-loads spec_path,
    compares spec_hash). The --set overrides a plan was made with are saved in it (`sets`) and
    applied again here."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PlanError(
            f"cannot read plan {path}: {exc}", hint="write one with `rmspec plan SPEC --out plan.json`"
        ) from None
    if not isinstance(data, dict) or "spec_hash" not in data or "spec_path" not in data:
        raise PlanError(
            f"{path} is not an rmspec plan (no spec_hash/spec_path)",
            hint="write one with `rmspec plan SPEC --out plan.json`",
        )
    if data.get("schema_version") != SCHEMA_VERSION:
        raise PlanError(
            f"{path}: plan schema_version {data.get('schema_version')!r}, this rmspec reads {SCHEMA_VERSION}",
            hint="plan again with this version of rmspec",
        )
    if check_spec:
        from rmspec.spec import load_spec

        spec_path = Path(data["spec_path"])
        if not spec_path.exists():
            raise PlanError(
                f"{path}: its spec {spec_path} no longer exists",
                hint="plan again from the spec: `rmspec plan SPEC --out PLAN`",
            )
        current = load_spec(spec_path, data.get("sets", ())).spec_hash
        if current != data["spec_hash"]:
            raise PlanError(
                f"{path}: the spec {spec_path} changed since this plan was made "
                f"(hash {data['spec_hash'][:12]} then, {current[:12]} now)",
                hint=f"plan again: `rmspec plan {spec_path} --out {path}`",
            )
    return data


def read_plan(path: str | Path, *, check_spec: bool = True) -> Plan:
    """load_plan, typed."""
    return Plan.from_json(load_plan(path, check_spec=check_spec), where=str(path))


def write_launch_files(plan: Plan | Mapping[str, Any], cwd: str | Path = ".") -> RunDir:
    """Write what `accelerate launch` reads into the run directory: plan.json, accelerate_config.yaml,
    and launch.slurm for several nodes. Paths in the plan are relative to `cwd` (where the run starts)."""
    from rmspec.plan.accelerate_config import to_yaml

    typed = as_plan(plan)
    run = RunDir(Path(cwd) / typed.run_dir)
    save_plan(typed, run.plan)
    atomic_write_text(run.accelerate_config, to_yaml(typed.accelerate_config))
    if typed.slurm_script:
        atomic_write_text(run.root / "launch.slurm", typed.slurm_script)
    return run
