"""What MODEL_OR_RUN names: a run directory (its spec gives layout, chat template, max_length and
approach) or a plain Hugging Face model folder. Light: reads JSON and YAML, imports no torch.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError


@dataclass
class Target:
    model_dir: Path
    run_dir: Path | None = None
    loaded_spec: Any = None  # rmspec.spec.LoadedSpec of the run, None for a bare model folder


def is_run_dir(path: Path) -> bool:
    return (path / "model").is_dir() and ((path / "spec.yaml").exists() or (path / "plan.json").exists())


def load_run_spec(run: Path) -> Any:
    """The spec as run: RUN/spec.yaml (--set applied), its relative paths resolved from the
    original spec's folder (plan.json spec_path); else the original spec with the plan's --set."""
    from rmspec.spec import load_spec

    plan: dict = {}
    if (run / "plan.json").exists():
        try:
            plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            plan = {}
    spec_path = plan.get("spec_path")
    if (run / "spec.yaml").exists():
        loaded = load_spec(run / "spec.yaml")
        return dataclasses.replace(loaded, file=Path(spec_path)) if spec_path else loaded
    if spec_path and Path(spec_path).exists():
        return load_spec(spec_path, tuple(plan.get("sets") or ()))
    raise RmspecError(f"{run}: no spec.yaml (nor a plan.json naming an existing spec)",
                      "use the model folder instead: RUN/model")


def resolve_target(target: str | Path) -> Target:
    path = Path(target)
    if not path.exists():
        raise RmspecError(f"{target}: no such run directory or model folder",
                          "give a run directory (runs/NAME) or a folder with config.json and weights")
    if is_run_dir(path):
        return Target(path / "model", path, load_run_spec(path))
    if not (path / "config.json").exists():
        raise RmspecError(f"{target} has no config.json: neither a run directory nor a Hugging Face model folder",
                          "give runs/NAME (after rmspec run) or the folder that holds config.json and the weights")
    return Target(path)
