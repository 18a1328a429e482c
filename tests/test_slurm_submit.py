"""`rmspec run --submit` refusals that need no cluster: a one-machine plan, and no SLURM client here."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.models import build_model
from helpers.runs import make_run_spec


def _run(*args: str, cwd, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "rmspec", "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_submit_refuses_a_plan_for_one_machine_before_writing_anything(tmp_path):
    spec = make_run_spec(tmp_path, name="one", model=build_model("llama", tmp_path / "model-src"))
    done = _run(str(spec), "--submit", cwd=tmp_path)
    assert done.returncode == 2 and "runs on one machine" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs" / "one").exists()


def test_submit_without_sbatch_says_where_to_submit(tmp_path):
    spec = make_run_spec(tmp_path, name="two", model=build_model("llama", tmp_path / "model-src"))
    spec.write_text(spec.read_text().replace("gpus_per_node: 1}", "gpus_per_node: 1, nodes: 2}"))
    done = _run(str(spec), "--submit", cwd=tmp_path, path=str(tmp_path))  # no SLURM client on PATH
    assert done.returncode == 2, done.stdout + done.stderr
    assert "sbatch is not on PATH" in done.stderr
    assert f"sbatch {tmp_path / 'runs' / 'two' / 'launch.slurm'}" in done.stderr
    assert (tmp_path / "runs" / "two" / "launch.slurm").exists()
