"""Nothing lost when part of a sweep dies (issue 39): a sweep killed with SIGKILL (its whole process group)
during a trial leaves that trial's run training in its own session, and `--resume` waits for it and records
what it really did; a trial stopped after Optuna suggested its values but before they were stored resumes
with the suggested values; two `--join` workers over the journal storage finish one budget, one of them
killed during a trial (with that trial's run, as when a node dies).

Cheap: a 2-layer Llama, 8 steps of 8 pairs, one validation pass at the end (tests/helpers/runs.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.models import build_model
from helpers.runs import make_run_spec, rmspec

optuna = need("optuna")
psutil = need("psutil")

pytestmark = pytest.mark.slow

SWEEP = """extends: tiny.yaml
training: {{max_steps: 8, save_steps: 4, logging_steps: 4}}
output: {{report: [console]}}  # no report.html per trial: cheaper, and not what these tests are about
sweep:
  space:
    training.learning_rate: {{kind: float, low: 1.0e-3, high: 3.0e-2, log: true}}
  objective: {{metric: validation.overall}}
  sampler: {{kind: random, seed: {seed}}}
  trials: {trials}
{extra}"""


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_model("llama", tmp_path_factory.mktemp("recovery-model") / "model-src")


def _spec(tmp: Path, model: Path, trials: int, seed: int = 0, extra: str = "") -> Path:
    make_run_spec(tmp, name="tiny", model=model, rows=60)
    spec = tmp / "sweep.yaml"
    spec.write_text(SWEEP.format(trials=trials, seed=seed, extra=extra))
    return spec


def _sweep(tmp: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rmspec", "sweep", *args],
        cwd=tmp,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, killed whole as a crash or an OOM killer would
    )


def _wait(predicate, timeout: float, what: str, *procs: subprocess.Popen) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"a sweep ended before {what}: " + (proc.stdout.read() if proc.stdout else ""))
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _results_value(run: Path) -> float:
    return json.loads((run / "results.json").read_text())["validation"]["overall"]


def _processes_naming(folder: Path) -> list[str]:
    """Live processes whose command line names anything under `folder` (trainers, launchers, sweeps)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                str(folder) in a for a in proc.info["cmdline"] or []
            ):
                found.append(" ".join(proc.info["cmdline"]))
    return found


def _study_equals_results(out: Path, storage, trials: int) -> list:
    study = optuna.load_study(study_name="tiny", storage=storage)
    found = study.get_trials()
    assert sorted(t.number for t in found) == list(range(trials))  # unique numbers, none missing
    assert [t.state for t in found] == [optuna.trial.TrialState.COMPLETE] * trials, [t.state for t in found]
    # distinct values: a resumed sweep or a second worker does not draw the same sequence again
    assert len({t.params["training.learning_rate"] for t in found}) == trials
    for trial in found:
        run = out / "trials" / f"{trial.number:03d}"
        assert trial.value == _results_value(run), trial.number
        status = json.loads((run / "status.json").read_text())
        assert status["state"] == "completed"
        assert f"learning_rate: {trial.params['training.learning_rate']!r}" in (run / "spec.yaml").read_text()
    return found


def test_kill_9_of_the_sweep_group_then_resume_waits_for_the_live_trial_and_records_it(tmp_path, model_dir):
    spec = _spec(tmp_path, model_dir, trials=2)
    out = tmp_path / "sw"
    proc = _sweep(tmp_path, str(spec), "-o", str(out))
    log = out / "logs" / "000.log"
    try:
        _wait(log.exists, 300, "trial 0's log", proc)
        time.sleep(3)  # three seconds into the trial, as measured in the issue: the trainer is still starting
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert _processes_naming(out / "trials" / "000"), "the trial's run should outlive its sweep"
    resumed = rmspec("sweep", "--resume", str(out), cwd=tmp_path, timeout=900)
    said = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, said
    assert "trial 0: " in said and "waiting for it to end" in said, said
    assert "re-running" not in said and "resuming" not in said
    _study_equals_results(out, f"sqlite:///{out / 'study.db'}", 2)
    # trial 0 ran once: the one launch the killed sweep started, none by the resume
    assert log.read_text().count("$ rmspec run") == 1
    assert _processes_naming(out) == []


def test_a_trial_stopped_between_suggestion_and_store_resumes_with_the_suggested_values(tmp_path, model_dir):
    from rmspec.sweep import opening, space

    spec = _spec(tmp_path, model_dir, trials=1, seed=3)
    out = tmp_path / "sw"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        sweep, lock = opening.start(str(spec), (), str(out))
        trial = sweep.study.ask()
        suggested = space.suggest(trial, sweep.spec)["training.learning_rate"]  # stored by Optuna; no values attr yet
        lock.release()
    finally:
        os.chdir(cwd)
    assert suggested != 3.0e-3  # not the spec's own value, which the defect ran instead
    resumed = rmspec("sweep", "--resume", str(out), cwd=tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    (done,) = _study_equals_results(out, f"sqlite:///{out / 'study.db'}", 1)
    assert done.params["training.learning_rate"] == suggested
    as_run = (out / "trials" / "000" / "spec.yaml").read_text()
    assert f"learning_rate: {suggested!r}" in as_run
    record = json.loads((out / "sweep.json").read_text())
    assert record["trials"][0]["values"] == {"training.learning_rate": suggested}


def _journal(out: Path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str(out / "study.journal")))


def test_two_join_workers_finish_one_budget_one_killed_with_its_trial(tmp_path, model_dir):
    spec = _spec(tmp_path, model_dir, trials=6, extra="  storage: journal\n")
    out = tmp_path / "sw"
    args = (str(spec), "-o", str(out), "--join")
    first, second = _sweep(tmp_path, *args), _sweep(tmp_path, *args)
    victim = None
    try:
        # the first trial with a trainer running: kill its worker and the trial's run (a node dying)
        def training() -> bool:
            nonlocal victim
            for status in out.glob("trials/*/status.json"):
                state = json.loads(status.read_text() or "{}")
                if state.get("state") == "running":
                    victim = status.parent
                    return True
            return False

        _wait(training, 600, "a trial training", first, second)
        record = json.loads((out / "locks" / f"{victim.name}.lock").read_text())
        worker = first if record["pid"] == first.pid else second
        survivor = second if worker is first else first
        os.killpg(worker.pid, signal.SIGKILL)
        for proc in psutil.process_iter(["cmdline"]):  # the trial's `rmspec run`, launcher and trainer
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                if any(str(victim) in a for a in proc.info["cmdline"] or []):
                    proc.kill()
        worker.wait(timeout=60)
        said, _ = survivor.communicate(timeout=1200)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert survivor.returncode == 0, said
    later = rmspec("sweep", "--resume", str(out), cwd=tmp_path, timeout=900)
    assert later.returncode == 0, later.stdout + later.stderr
    found = _study_equals_results(out, _journal(out), 6)
    killed = int(victim.name)
    by_number = {t.number: t for t in found}
    # the killed worker asked for the trial; a live one (the survivor, or the later --resume) finished it
    assert by_number[killed].user_attrs["worker"].endswith(f":{worker.pid}")
    assert by_number[killed].user_attrs["adopted_by"].rsplit(":", 1)[1] != str(worker.pid)
    logs = {t.number: (out / "logs" / f"{t.number:03d}.log").read_text() for t in found}
    # every trial launched once, except the killed one: launched again (from its checkpoint or the start)
    assert {n: text.count("$ rmspec run") for n, text in logs.items() if n != killed} == {
        n: 1 for n in logs if n != killed
    }
    assert logs[killed].count("$ rmspec run") == 2
    assert _processes_naming(out) == []
