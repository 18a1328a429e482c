"""The layout of a run directory: one place that names every file a run writes, and the
atomic writes every writer uses.

Light on purpose (no torch): the planner lists these files, the trainer writes them,
the report reads them.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLAIM_LOCK = ".claim.lock"
TRAINER_LOCK = ".trainer.lock"
LOCK_FILES = (CLAIM_LOCK, TRAINER_LOCK)  # never removed: a new file would be a new, unheld lock


@dataclass(frozen=True)
class RunDir:
    root: Path

    # --- what was run
    @property
    def spec(self) -> Path:  # the merged spec document as run (YAML)
        return self.root / "spec.yaml"

    @property
    def plan(self) -> Path:  # the plan as run (JSON)
        return self.root / "plan.json"

    @property
    def accelerate_config(self) -> Path:
        return self.root / "accelerate_config.yaml"

    @property
    def versions(self) -> Path:  # resolved package versions, python, platform
        return self.root / "versions.json"

    # --- data
    @property
    def rejects(self) -> Path:  # JSONL: source_index, stage, reason, row
        return self.root / "rejects.jsonl"

    @property
    def data_report(self) -> Path:
        return self.root / "data_report.json"

    # --- training
    @property
    def metrics(self) -> Path:  # JSONL, one object per logging step
        return self.root / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def model(self) -> Path:  # final model: safetensors, tokenizer, config, README.md card
        return self.root / "model"

    @property
    def status(self) -> Path:  # running / completed / failed / interrupted, written atomically
        return self.root / "status.json"

    # --- evaluation and report
    @property
    def eval_dir(self) -> Path:  # per-benchmark per-example JSONL files
        return self.root / "eval"

    @property
    def results(self) -> Path:  # results.json with schema_version
        return self.root / "results.json"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    # --- ownership (rmspec.rundir.lock holds flock(2) locks on these; see LOCK_FILES)
    @property
    def claim_lock(self) -> Path:  # held by `rmspec run` from the claim until it exits
        return self.root / CLAIM_LOCK

    @property
    def trainer_lock(self) -> Path:  # held by the trainer of global rank 0 while it trains
        return self.root / TRAINER_LOCK

    def files(self) -> list[Path]:
        return [
            self.spec,
            self.plan,
            self.accelerate_config,
            self.versions,
            self.rejects,
            self.data_report,
            self.metrics,
            self.checkpoints,
            self.model,
            self.status,
            self.eval_dir,
            self.results,
            self.report_html,
        ]


def follow_umask(path: Path, *, tree: bool = False) -> None:
    """Give a file or folder made private (mkstemp's 0600, mkdtemp's 0700, safetensors' 0600) the mode an
    ordinary write gets under the umask (0666/0777 less it): a run's files and its model can be read by
    whoever may read the run. ``tree``: the folder and everything in it."""
    umask = os.umask(0)
    os.umask(umask)
    for each in [path, *(path.rglob("*") if tree else ())]:
        os.chmod(each, (0o777 if each.is_dir() else 0o666) & ~umask)


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        follow_umask(Path(tmp))  # mkstemp makes 0600; a written spec or report is not secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of the run, or {} when it is missing, unreadable or not an object
    (a run directory is read while its writers may still be starting)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
