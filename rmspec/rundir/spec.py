"""RUN/spec.yaml: the spec as run, for everything that works on a run after it was launched
(the trainer, eval, score, serve). Light: no torch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from rmspec.errors import RmspecError
from rmspec.rundir.layout import RunDir, read_json

if TYPE_CHECKING:
    from rmspec.spec import LoadedSpec


def load_run_spec(run: RunDir | Path) -> LoadedSpec:
    """The spec as run: RUN/spec.yaml (extends and --set already applied), with its relative paths
    resolving against the original spec's folder (plan.json's spec_path), where the user wrote
    them; a run without spec.yaml falls back to the original spec with the plan's --set."""
    from rmspec.spec import load_spec

    run = run if isinstance(run, RunDir) else RunDir(Path(run))
    plan = read_json(run.plan)  # only spec_path and sets: the typed Plan lives above this layer
    spec_path = plan.get("spec_path")
    if run.spec.exists():
        loaded = load_spec(run.spec)
        return dataclasses.replace(loaded, file=Path(spec_path)) if spec_path else loaded
    if spec_path and Path(spec_path).exists():
        return load_spec(spec_path, tuple(plan.get("sets") or ()))
    raise RmspecError(
        f"{run.root}: no spec.yaml (nor a plan.json naming an existing spec)", "use the model folder instead: RUN/model"
    )
