"""The sweep directory: one place that names every file `rmspec sweep` writes.

    DIR/study.db        Optuna's study with sweep.storage sqlite: optuna.load_study(study_name=NAME,
                        storage="sqlite:///DIR/study.db"); DIR/study.journal with storage journal
                        (rmspec.sweep.storage says how to open each; an RDB URL keeps it on its server)
    DIR/sweep.yaml      the spec the sweep started from, merged (extends applied), for --resume to check
    DIR/sweep.json      every trial: parameters, state, objective, run directories
    DIR/best.yaml       the full spec of the best trial, runnable on its own
    DIR/report.html     objective by trial, parameters against objective, importances
    DIR/trials/NNN      trial NNN's run (one seed), or DIR/trials/NNN/seed-S (several seeds)
    DIR/logs/NNN[-sS].log  what `rmspec run` of that run printed
    DIR/locks/NNN.lock  held (flock) by the sweep process that works on trial NNN: one owner per trial
    DIR/jobs/NNN[-sS].slurm  the batch script of a trial's run submitted as a SLURM job (sweep.slurm)
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
    def study_journal(self) -> Path:
        return self.root / "study.journal"

    @property
    def create_lock(self) -> Path:  # held while a worker creates the study, so that two --join do not both
        return self.root / ".create.lock"

    def trial_lock(self, number: int) -> Path:
        return self.root / "locks" / f"{number:03d}.lock"

    def job_script(self, number: int, seed: int, several_seeds: bool) -> Path:
        return self.root / "jobs" / (f"{number:03d}-s{seed}.slurm" if several_seeds else f"{number:03d}.slurm")

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
        """A sweep was started here: its record names the storage (study.db alone: a sweep before sweep.json)."""
        return self.sweep_json.exists() or self.study_db.exists()
