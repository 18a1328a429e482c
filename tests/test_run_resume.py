"""A run killed with SIGKILL after a checkpoint and resumed ends with the same final metrics as
an uninterrupted run (seeds, RNG and data order restored); Ctrl-C saves a checkpoint and stops."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from helpers.models import build_model
from helpers.polling import _wait_for, kill_trainer, kill_trainer_at_checkpoint, start_run
from helpers.runs import make_run_spec, metrics_rows, rmspec

TRAINING = "  max_steps: 30\n  save_steps: 10\n  save_total_limit: 5\n  group_by_length: true"


def _final(run: Path) -> dict:
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed", status
    return status


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_model("llama", tmp_path_factory.mktemp("resume") / "model-src")


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path, model_dir):
    ref_spec = make_run_spec(tmp_path, name="ref", training=TRAINING, batch=4, model=model_dir)
    done = rmspec("run", str(ref_spec), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    reference = _final(tmp_path / "runs" / "ref")

    spec = make_run_spec(tmp_path, name="killed", training=TRAINING, batch=4, model=model_dir)
    run = tmp_path / "runs" / "killed"
    # Kill the training process (not the parent) once the step-10 checkpoint is complete.
    assert kill_trainer_at_checkpoint(spec, tmp_path, run, 10, timeout=240) == 1  # the parent reports the failure
    assert json.loads((run / "status.json").read_text())["state"] != "completed"
    assert not (run / "model").exists()

    resumed = rmspec("run", "--resume", str(run), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = _final(run)
    assert final["resumed"] is True and final["step"] == reference["step"] == 30
    for key, value in reference["metrics"].items():
        if key.startswith("eval/rm/"):
            assert final["metrics"][key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    # The training curve after the resume point is the same too, and no step is logged twice.
    ref_rows = {r["step"]: r for r in metrics_rows(tmp_path / "runs" / "ref") if "train/rm/loss" in r}
    got_rows = [r for r in metrics_rows(run) if "train/rm/loss" in r]
    assert len({r["step"] for r in got_rows}) == len(got_rows)
    for row in got_rows:
        assert row["train/rm/loss"] == pytest.approx(ref_rows[row["step"]]["train/rm/loss"], rel=1e-4, abs=1e-6)


def test_ctrl_c_saves_a_checkpoint_and_stops_cleanly(tmp_path, model_dir):
    # far more steps than can finish before the signal: 400 once ran out in 2.3 s, before the poll saw step 4
    spec = make_run_spec(
        tmp_path, name="sigint", training="  max_steps: 100000\n  save_steps: 1000000", batch=4, model=model_dir
    )
    run = tmp_path / "runs" / "sigint"
    proc = start_run(spec, tmp_path)
    try:
        _wait_for(lambda: any(r.get("step", 0) >= 4 for r in _rows(run)), 240, proc)
        proc.send_signal(signal.SIGINT)  # what the terminal sends the parent on Ctrl-C
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_trainer(run)
    assert proc.returncode == 130, out
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "interrupted"
    assert status["checkpoint"] and Path(status["checkpoint"]).name == f"checkpoint-{status['step']}"
    assert (Path(status["checkpoint"]) / "trainer_state.json").exists()
    assert "rmspec run --resume" in out


def _rows(run: Path) -> list[dict]:
    try:
        return metrics_rows(run)
    except (OSError, ValueError):
        return []
