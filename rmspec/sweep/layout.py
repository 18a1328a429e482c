"""The sweep directory: one place that names every file `rmspec sweep` writes.

    DIR/study.db        Optuna's study (SQLite): optuna.load_study(study_name=NAME, storage=sqlite:///DIR/study.db)
    DIR/sweep.yaml      the spec the sweep started from, merged (extends applied), for --resume to check
    DIR/sweep.json      every trial: parameters, state, objective, run directories
    DIR/best.yaml       the full spec of the best trial, runnable on its own
    DIR/report.html     objective by trial, parameters against objective, importances
    DIR/trials/NNN      trial NNN's run (one seed), or DIR/trials/NNN/seed-S (several seeds)
    DIR/logs/NNN[-sS].log  what `rmspec run` of that run printed
Light: no Optuna, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SweepDir:
    root: Path

    @property
    def study_db(self) -> Path:
        return self.root / "study.db"

    @property
    def storage_url(self) -> str:
        return f"sqlite:///{self.study_db.resolve()}"

    @property
    def spec(self) -> Path:
        return self.root / "sweep.yaml"

    @property
    def sweep_json(self) -> Path:
        return self.root / "sweep.json"

    @property
    def best_yaml(self) -> Path:
        return self.root / "best.yaml"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def trials(self) -> Path:
        return self.root / "trials"

    def run_dir(self, number: int, seed: int, several_seeds: bool) -> Path:
        """Trial `number`'s run for `seed`: trials/NNN, or trials/NNN/seed-S when the trial has several."""
        trial = self.trials / f"{number:03d}"
        return (trial / f"seed-{seed}").resolve() if several_seeds else trial.resolve()

    def log(self, number: int, seed: int, several_seeds: bool) -> Path:
        return self.root / "logs" / (f"{number:03d}-s{seed}.log" if several_seeds else f"{number:03d}.log")

    def is_sweep(self) -> bool:
        return self.study_db.exists()
