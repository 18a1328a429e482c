"""`rmspec run` end to end on a tiny Llama-shaped model: plan, run directory, the launch,
the final model, status and metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.runs import make_run_spec, metrics_rows, rmspec

REPO = Path(__file__).resolve().parents[1]


def test_run_trains_and_writes_the_run_directory(tmp_path):
    spec = make_run_spec(tmp_path)
    done = rmspec("run", str(spec), cwd=tmp_path)
    run = tmp_path / "runs" / "tiny"
    assert done.returncode == 0, done.stdout + done.stderr + (run / "train.log").read_text()
    for name in (
        "spec.yaml",
        "plan.json",
        "accelerate_config.yaml",
        "versions.json",
        "data_report.json",
        "metrics.jsonl",
        "status.json",
    ):
        assert (run / name).exists(), name
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed"
    assert status["step"] == 8 and status["global_batch_size"] == 8
    assert status["metrics"]["eval/rm/accuracy"] > 0.7  # w1-vs-w2 is learnable in 8 steps
    rows = [r for r in metrics_rows(run) if "train/rm/loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 4, 6, 8]
    assert {"train/rm/accuracy", "train/rm/lr", "grad_norm", "peak_memory_gb"} <= set(rows[-1])

    model = run / "model"
    config = json.loads((model / "config.json").read_text())
    assert config["reward_std"] > 0 and config["rmspec"]["approach"] == "bradley_terry"
    assert (model / "model.safetensors").exists() and "eval/rm/accuracy" in (model / "README.md").read_text()
    versions = json.loads((run / "versions.json").read_text())
    assert versions["packages"]["transformers"]

    # A second run into the same directory is refused with a hint, not mixed in.
    again = rmspec("run", str(spec), cwd=tmp_path)
    assert again.returncode == 2 and "--resume" in again.stderr


def test_run_a_saved_plan_and_refuse_it_once_the_spec_changed(tmp_path):
    spec = make_run_spec(tmp_path, name="planned", training="  max_steps: 2")
    plan = tmp_path / "plan.json"
    made = rmspec("plan", str(spec), "--out", str(plan), cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    done = rmspec("run", str(plan), cwd=tmp_path)
    run = tmp_path / "runs" / "planned"
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((run / "status.json").read_text())["step"] == 2
    assert json.loads((run / "plan.json").read_text())["spec_hash"] == json.loads(plan.read_text())["spec_hash"]
    spec.write_text(spec.read_text().replace("max_steps: 2", "max_steps: 3"))
    stale = rmspec("run", str(plan), "--overwrite", cwd=tmp_path)
    assert stale.returncode == 2 and "changed" in stale.stderr


def test_resume_of_a_completed_run_is_refused(tmp_path):
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (run / "plan.json").write_text("{}")
    (run / "status.json").write_text(json.dumps({"state": "completed"}))
    done = rmspec("run", "--resume", str(run), cwd=tmp_path)
    assert done.returncode == 2 and "already completed" in done.stderr


def test_parent_process_never_imports_torch():
    code = "import sys, rmspec.cli.run_cmd, rmspec.render.live_view; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
