"""Trackers beside metrics.jsonl: TensorBoard, Weights & Biases, MLflow, Trackio, SwanLab.

Each gets the rows metrics.jsonl gets, under the same names at the same steps (MetricsJsonl hands
them over after writing), and the spec and plan as its config. transformers' own integrations are
not used because each renames metrics its own way (TensorBoard's `train/loss` where metrics.jsonl
says `train/rm/loss`). Each runs locally unless the spec asks otherwise: TensorBoard event files
in RUN/tensorboard, wandb offline in RUN/wandb, MLflow's SQLite store RUN/mlflow.db, SwanLab offline
in RUN/swanlog, Trackio's SQLite store in RUN/trackio (TRACKIO_DIR, unless the user set it).
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError

PACKAGES = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "trackio": "trackio",
    "swanlab": "swanlab",
}
INSTALL = {"mlflow": "mlflow-skinny alembic"}  # full mlflow does not install under the pinned pyarrow


def check_installed(backends: list[str]) -> None:
    missing = [b for b in backends if importlib.util.find_spec(PACKAGES[b]) is None]
    if missing:
        raise RmspecError(
            f"tracking.backends asks for {', '.join(missing)}, which is not installed",
            hint=f"pip install {' '.join(INSTALL.get(b, PACKAGES[b]) for b in missing)}, or remove it from "
            "tracking.backends (metrics.jsonl is always written)",
        )


def numeric(row: dict[str, Any]) -> dict[str, float]:
    """The metrics of a metrics.jsonl row (numbers; no step, time or event)."""
    return {
        k: float(v)
        for k, v in row.items()
        if k not in ("step", "max_steps", "time", "event")
        and isinstance(v, (int, float))
        and not isinstance(v, bool)
        and math.isfinite(float(v))
    }


class Tracker:
    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class TensorBoard(Tracker):
    def __init__(self, root: Path, config: dict):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(root / "tensorboard"))
        import json

        self.writer.add_text("rmspec/config", "```json\n" + json.dumps(config, indent=1, default=str) + "\n```")

    def log(self, metrics, step):
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self):
        self.writer.close()


class Wandb(Tracker):
    def __init__(self, root: Path, config: dict, settings: Any, name: str):
        import wandb

        self.run = wandb.init(
            project=settings.project, name=name, dir=str(root), mode=settings.mode, config=config, reinit="create_new"
        )

    def log(self, metrics, step):
        self.run.log(metrics, step=step)

    def close(self):
        self.run.finish()


class Mlflow(Tracker):
    def __init__(self, root: Path, config: dict, settings: Any, name: str):
        import mlflow

        uri = settings.tracking_uri or f"sqlite:///{(root / 'mlflow.db').resolve()}"
        self.client = mlflow.MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(settings.experiment)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(
                settings.experiment, artifact_location=(root / "mlartifacts").resolve().as_uri()
            )
        )
        self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
        self.client.log_dict(self.run_id, config, "rmspec_config.json")
        flat = {k: str(v)[:6000] for k, v in _flatten(config.get("spec", {})).items()}
        for key, value in list(flat.items())[:100]:
            self.client.log_param(self.run_id, key, value)

    def log(self, metrics, step):
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def close(self):
        self.client.set_terminated(self.run_id)


class Swanlab(Tracker):
    def __init__(self, root: Path, config: dict, settings: Any, name: str):
        import swanlab

        self.run = swanlab.init(
            project=settings.project,
            experiment_name=name,
            mode=settings.mode,
            logdir=str(root / "swanlog"),
            config=config,
        )

    def log(self, metrics, step):
        self.run.log(metrics, step=step)

    def close(self):
        self.run.finish()


class Trackio(Tracker):
    def __init__(self, root: Path, config: dict, settings: Any, name: str):
        # trackio reads TRACKIO_DIR once, at import: set it first so the store lands in the run.
        os.environ.setdefault("TRACKIO_DIR", str(root / "trackio"))
        import trackio

        self.trackio = trackio
        trackio.init(project=settings.project, name=name, config=config, space_id=settings.space_id)

    def log(self, metrics, step):
        self.trackio.log(metrics, step=step)

    def close(self):
        self.trackio.finish()


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): data}


def open_trackers(spec: Any, plan_json: dict | None, root: Path) -> list[Tracker]:
    """The spec's trackers, opened on the main process (the config: the spec as run and the plan)."""
    backends = list(spec.tracking.backends)
    check_installed(backends)
    config = {"spec": spec.model_dump(mode="json"), "plan": plan_json or {}}
    tracking, name = spec.tracking, spec.name
    os.environ.setdefault("WANDB_SILENT", "true")
    out: list[Tracker] = []
    for backend in backends:
        if backend == "tensorboard":
            out.append(TensorBoard(root, config))
        elif backend == "wandb":
            out.append(Wandb(root, config, tracking.wandb, name))
        elif backend == "mlflow":
            out.append(Mlflow(root, config, tracking.mlflow, name))
        elif backend == "swanlab":
            out.append(Swanlab(root, config, tracking.swanlab, name))
        elif backend == "trackio":
            out.append(Trackio(root, config, tracking.trackio, name))
    return out
