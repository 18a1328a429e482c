"""What MODEL_OR_RUN names: a run directory (its spec gives layout, chat template, max_length and
approach) or a plain Hugging Face model folder. Light: reads JSON and YAML, imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.rundir import load_run_spec  # the spec as run: one home, re-exported for eval and score


@dataclass
class Target:
    model_dir: Path
    run_dir: Path | None = None
    loaded_spec: Any = None  # rmspec.spec.LoadedSpec of the run, None for a bare model folder


def is_run_dir(path: Path) -> bool:
    return (path / "model").is_dir() and ((path / "spec.yaml").exists() or (path / "plan.json").exists())


def resolve_target(target: str | Path) -> Target:
    path = Path(target)
    if not path.exists():
        raise RmspecError(
            f"{target}: no such run directory or model folder",
            "give a run directory (runs/NAME) or a folder with config.json and weights",
        )
    if is_run_dir(path):
        return Target(path / "model", path, load_run_spec(path))
    if not (path / "config.json").exists():
        raise RmspecError(
            f"{target} has no config.json: neither a run directory nor a Hugging Face model folder",
            "give runs/NAME (after rmspec run) or the folder that holds config.json and the weights",
        )
    return Target(path)
