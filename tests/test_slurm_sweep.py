"""Trials as SLURM jobs (sweep.slurm, issue 39) on the real two-node cluster (tests/helpers/slurm_cluster.py):
a 4-trial CPU sweep, 2 jobs at a time, each trial's `rmspec run` a one-node job; Optuna's own load_study
finds 4 trials whose values are their runs' results.json, numbers unique, and each run directory written by
the one job the sweep submitted for it. Cheap: a 2-layer Llama, 8 steps, one validation pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.models import build_model
from helpers.runs import make_run_spec

optuna = need("optuna")

pytestmark = pytest.mark.slow
pytest_plugins = ["helpers.slurm_cluster"]

PARTITION = "rmspec"  # tests/helpers/slurm_cluster.py: not the default partition, so the setting must reach sbatch
SWEEP = f"""extends: tiny.yaml
training: {{max_steps: 8, logging_steps: 4}}
output: {{report: [console]}}  # no report.html per trial: cheaper
sweep:
  space:
    training.learning_rate: {{kind: float, low: 1.0e-3, high: 3.0e-2, log: true}}
  objective: {{metric: validation.overall}}
  sampler: {{kind: random, seed: 0}}
  trials: 4
  parallel: 2
  slurm: {{partition: {PARTITION}, time: "00:10:00"}}
"""


def _job_field(cluster, job: str, name: str) -> str:
    shown = cluster.run("scontrol", "show", "job", job, check=False).stdout
    return next((word.split("=", 1)[1] for word in shown.split() if word.startswith(name + "=")), "")


def test_four_trials_as_slurm_jobs_two_at_a_time_study_equals_results(tmp_path, slurm_cluster):
    make_run_spec(tmp_path, name="tiny", model=build_model("llama", tmp_path / "model-src"), rows=60)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(SWEEP)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "NO_COLOR": "1",
        "SLURM_CONF": str(slurm_cluster.conf),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    out = tmp_path / "sw"
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "sweep", str(spec), "-o", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr + slurm_cluster.logs()
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{out / 'study.db'}")
    trials = study.get_trials()
    assert sorted(t.number for t in trials) == [0, 1, 2, 3]
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), [t.state for t in trials]
    spans, jobs = [], set()
    for trial in trials:
        run = out / "trials" / f"{trial.number:03d}"
        results = json.loads((run / "results.json").read_text())
        assert trial.value == results["validation"]["overall"]
        assert f"learning_rate: {trial.params['training.learning_rate']!r}" in (run / "spec.yaml").read_text()
        (job,) = trial.user_attrs["slurm_jobs"].values()  # one job per trial, never a second submission
        jobs.add(job)
        status = json.loads((run / "status.json").read_text())
        # the run was trained by that job's process, and by no other: one launch in the trial's log
        assert status["state"] == "completed" and status["slurm_job_id"] == job
        log = (out / "logs" / f"{trial.number:03d}.log").read_text()
        assert log.count(f"$ {sys.executable} -m rmspec run") == 1 and f"(SLURM job {job} on n" in log
        assert _job_field(slurm_cluster, job, "Partition") in (PARTITION, "")  # "" once scontrol forgot it
        spans.append((status["started"], status["finished"]))
    assert len(jobs) == 4
    # two at a time: some two trainings overlapped, and never three (parallel 2)
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2, spans


PRUNE = f"""extends: tiny.yaml
training: {{max_steps: 60, eval_steps: 5, logging_steps: 5}}
output: {{report: [console]}}
eval: {{validation: true, benchmarks: []}}
sweep:
  space:
    training.learning_rate: {{kind: categorical, choices: [0.003, 0.9]}}
  objective: {{metric: validation.overall}}
  first_trials: [{{training.learning_rate: 0.003}}, {{training.learning_rate: 0.9}}]
  pruner: {{kind: median, startup_trials: 1}}
  trials: 2
  slurm: {{partition: {PARTITION}, time: "00:10:00"}}
"""


def test_a_diverging_trial_as_a_job_is_pruned_with_scancel(tmp_path, slurm_cluster):
    """The sweep reads the job's metrics.jsonl while it runs, and cancels the job when the pruner says so."""
    make_run_spec(tmp_path, name="tiny", model=build_model("llama", tmp_path / "model-src"), rows=60)
    spec = tmp_path / "prune.yaml"
    spec.write_text(PRUNE)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
        "SLURM_CONF": str(slurm_cluster.conf),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    out = tmp_path / "sw"
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "sweep", str(spec), "-o", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr + slurm_cluster.logs()
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{out / 'study.db'}")
    good, bad = study.get_trials()
    assert good.state == optuna.trial.TrialState.COMPLETE
    assert bad.state == optuna.trial.TrialState.PRUNED, bad.state
    step = max(bad.intermediate_values)
    assert bad.intermediate_values[step] < good.intermediate_values[step]
    (job,) = bad.user_attrs["slurm_jobs"].values()
    assert _job_field(slurm_cluster, job, "JobState") in ("CANCELLED", "")  # "" once scontrol forgot it
    run = out / "trials" / "001"
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "pruned" and status["step"] == step
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(row["step"] for row in rows if "step" in row) < 60 and not (run / "model").exists()
