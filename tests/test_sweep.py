"""`rmspec sweep` on a tiny Llama: trials are ordinary runs, the study is Optuna's own SQLite file, a killed
sweep resumes without touching finished trials, a diverging trial is pruned by the median pruner,
best.yaml reproduces the best trial, and `rmspec compare` reads the trials as they are on disk.

One sweep (module fixture) serves several tests: it is killed during its third trial and resumed, then
read by Optuna, re-run from best.yaml and compared. Slow: each trial is a real `rmspec run`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.ci import need
from helpers.models import build_model
from helpers.polling import _wait_for, kill_trainer
from helpers.runs import make_run_spec, rmspec

optuna = need("optuna")
psutil = need("psutil")

pytestmark = pytest.mark.slow

OBJECTIVE = "validation.diagnostics.rewards.margin.mean"
SWEEP = """extends: tiny.yaml
training: {{max_steps: 40, save_steps: 10, logging_steps: 5}}
sweep:
  space:
    training.learning_rate: {{kind: float, low: 1.0e-3, high: 3.0e-2, log: true}}
    training.warmup_ratio: {{kind: float, low: 0.0, high: 0.3}}
  objective: {{metric: {objective}, direction: maximize}}
  sampler: {{kind: random, seed: 0}}
  trials: 6
"""


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}


def _metric(results: dict, path: str) -> float:
    node = results
    for part in path.split("."):
        node = node[part]
    return node


def _results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def _snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under `folder` with its modification time and content hash."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_model("llama", tmp_path_factory.mktemp("sweep-model") / "model-src")


@pytest.fixture(scope="module")
def resumed_sweep(tmp_path_factory, model_dir):
    """A 6-trial sweep killed (with its trial's trainer) during trial 3, then resumed to the end."""
    tmp = tmp_path_factory.mktemp("sweep")
    make_run_spec(tmp, name="tiny", model=model_dir)
    spec = tmp / "sweep.yaml"
    spec.write_text(SWEEP.format(objective=OBJECTIVE))
    out = tmp / "sw"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmspec", "sweep", str(spec), "-o", str(out)],
        cwd=tmp,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the test kills the sweep's whole process group, as a crash would
    )
    third = out / "trials" / "002" / "status.json"
    saved = out / "trials" / "002" / "checkpoints" / "checkpoint-10" / "trainer_state.json"
    try:
        _wait_for(saved.exists, 600, proc)  # killed after its first checkpoint: the resume continues from it
        trainer = json.loads(third.read_text())["pid"]
        os.killpg(proc.pid, signal.SIGKILL)
        os.killpg(os.getpgid(trainer), signal.SIGKILL)  # the trial's launcher and trainer (their own session)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    _wait_for_gone(trainer)
    before = {n: _snapshot(out / "trials" / n) for n in ("000", "001")}
    resumed = rmspec("sweep", "--resume", str(out), cwd=tmp, timeout=900)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return {"tmp": tmp, "out": out, "before": before, "resume_output": resumed.stdout + resumed.stderr}


def _wait_for_gone(pid: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).wait(timeout=30)


def test_optuna_reads_six_trials_whose_values_are_the_runs_results(resumed_sweep):
    out = resumed_sweep["out"]
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{out / 'study.db'}")
    trials = study.get_trials()
    assert len(trials) == 6
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), [t.state for t in trials]
    for trial in trials:
        run = out / "trials" / f"{trial.number:03d}"
        assert trial.value == _metric(_results(run), OBJECTIVE)
        spec_as_run = (run / "spec.yaml").read_text()
        assert f"learning_rate: {trial.params['training.learning_rate']!r}" in spec_as_run
    record = json.loads((out / "sweep.json").read_text())
    assert [t["objective"] for t in record["trials"]] == [t.value for t in trials]
    assert record["best"]["number"] == study.best_trial.number
    assert set(record["importances"]) == {"training.learning_rate", "training.warmup_ratio"} or isinstance(
        record["importances"], str
    )
    html = (out / "report.html").read_text()
    assert "objective by trial" in html and "data:image/png;base64," in html


def test_resume_keeps_finished_trials_and_finishes_the_killed_one(resumed_sweep):
    out = resumed_sweep["out"]
    for number, files in resumed_sweep["before"].items():
        assert _snapshot(out / "trials" / number) == files, f"trial {number} was touched by the resume"
    said = resumed_sweep["resume_output"]
    assert "trial 2: resuming" in said, said
    status = json.loads((out / "trials" / "002" / "status.json").read_text())
    assert status["state"] == "completed" and status["step"] == 40
    assert status["resumed"] is True and Path(status["resumed_from"]).name.startswith("checkpoint-")


def test_best_yaml_reruns_to_the_best_trials_metric_exactly(resumed_sweep):
    out, tmp = resumed_sweep["out"], resumed_sweep["tmp"]
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{out / 'study.db'}")
    again = tmp / "best-again"
    # from another folder: best.yaml's data and model paths must not depend on where it is run
    done = rmspec("run", str(out / "best.yaml"), "--set", f"output.dir={again}", cwd=out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _metric(_results(again), OBJECTIVE) == study.best_value


def _flat(node, prefix=""):
    if isinstance(node, dict):
        return {k: v for key, value in node.items() for k, v in _flat(value, f"{prefix}{key}.").items()}
    return {prefix[:-1]: node}


def test_compare_three_trials_shows_their_results_and_exactly_the_differing_keys(resumed_sweep):
    out = resumed_sweep["out"]
    runs = [out / "trials" / n for n in ("000", "001", "002")]
    done = rmspec("compare", *map(str, runs), "--json", cwd=out)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    specs = [_flat(yaml.safe_load((r / "spec.yaml").read_text())) for r in runs]
    keys = set().union(*specs)
    differing = {k for k in keys if len({json.dumps(s.get(k)) for s in specs}) > 1}
    assert set(found["differences"]) == differing
    assert differing == {"name", "output.dir", "training.learning_rate", "training.warmup_ratio"}
    for run, shown in zip(runs, found["runs"], strict=True):
        results = _results(run)
        assert shown["metrics"]["validation.overall"] == results["validation"]["overall"]
        assert shown["metrics"]["validation.subsets.all"] == results["validation"]["subsets"]["all"]
        status = json.loads((run / "status.json").read_text())
        assert shown["train_seconds"] == status["train_seconds"]
        tokens = [json.loads(line).get("num_tokens") for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert shown["tokens"] == [t for t in tokens if t is not None][-1]
    table = rmspec("compare", *map(str, runs), cwd=out)
    assert table.returncode == 0
    for run in runs:
        assert f"{_results(run)['validation']['overall']:.4f}" in table.stdout


PRUNE = """extends: tiny.yaml
training: {max_steps: 300, eval_steps: 5, logging_steps: 5}
eval: {validation: true, benchmarks: []}
sweep:
  space:
    training.learning_rate: {kind: categorical, choices: [0.003, 0.9]}
  objective: {metric: validation.overall}
  first_trials: [{training.learning_rate: 0.003}, {training.learning_rate: 0.9}]
  pruner: {kind: median, startup_trials: 1}
  trials: 2
"""


def test_a_diverging_trial_is_pruned_its_trainer_killed_and_its_status_says_where(tmp_path, model_dir):
    make_run_spec(tmp_path, name="tiny", model=model_dir)
    spec = tmp_path / "prune.yaml"
    spec.write_text(PRUNE)
    done = rmspec("sweep", str(spec), "-o", "sw", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{tmp_path / 'sw' / 'study.db'}")
    good, bad = study.get_trials()
    assert good.state == optuna.trial.TrialState.COMPLETE and good.params["training.learning_rate"] == 0.003
    assert bad.state == optuna.trial.TrialState.PRUNED and bad.params["training.learning_rate"] == 0.9
    step = max(bad.intermediate_values)  # the step whose report made should_prune say yes
    assert bad.intermediate_values[step] < good.intermediate_values[step]
    run = tmp_path / "sw" / "trials" / "001"
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "pruned" and status["step"] == step
    assert not psutil.pid_exists(status["pid"]) or psutil.Process(status["pid"]).status() == psutil.STATUS_ZOMBIE
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [row["step"] for row in rows if "step" in row]  # stage rows (rmspec.train.finish) carry no step
    assert max(logged) < 300  # stopped long before its last step
    assert not (run / "model").exists()


LONG = """extends: tiny.yaml
training: {max_steps: 100000, save_steps: 100000}
sweep:
  space:
    training.learning_rate: {kind: float, low: 1.0e-3, high: 3.0e-2, log: true}
  objective: {metric: validation.overall}
  trials: 2
"""


def test_ctrl_c_stops_the_trial_with_a_checkpoint_and_the_sweep_with_the_resume_command(tmp_path, model_dir):
    make_run_spec(tmp_path, name="tiny", model=model_dir)
    spec = tmp_path / "long.yaml"
    spec.write_text(LONG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmspec", "sweep", str(spec), "-o", "sw"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    metrics = tmp_path / "sw" / "trials" / "000" / "metrics.jsonl"
    try:
        _wait_for(lambda: metrics.exists() and len(metrics.read_text().splitlines()) > 3, 600, proc)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the foreground group
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_trainer(metrics.parent)
    assert proc.returncode == 130, out
    assert "rmspec sweep --resume sw" in out
    status = json.loads((tmp_path / "sw" / "trials" / "000" / "status.json").read_text())
    assert status["state"] == "interrupted" and Path(status["checkpoint"]).name == f"checkpoint-{status['step']}"
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{tmp_path / 'sw' / 'study.db'}")
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.RUNNING]  # --resume finishes it
