"""A GRPO judge killed with SIGKILL after a checkpoint and resumed logs the same metrics as an
uninterrupted run (CPU; the sampling RNG, data order and weights restored from the checkpoint)."""

from __future__ import annotations

import json

import pytest

from helpers.ci import need

need("trl")

from helpers.judge_grpo import build_judge_model, write_spec  # noqa: E402
from helpers.polling import kill_trainer_at_checkpoint  # noqa: E402
from helpers.runs import metrics_rows, rmspec  # noqa: E402

pytestmark = pytest.mark.slow
COMPARED = ("train/sft/reward", "train/sft/judge/unparsed_rate", "train/sft/completions/mean_length", "train/sft/loss")


def test_sigkill_at_a_checkpoint_then_resume_gives_the_same_metrics(tmp_path):
    model = build_judge_model(tmp_path / "model-src")
    ref = write_spec(tmp_path, model, name="ref", steps=10, save=5)
    done = rmspec("run", str(ref), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    spec = write_spec(tmp_path, model, name="killed", steps=10, save=5)
    run = tmp_path / "runs" / "killed"
    kill_trainer_at_checkpoint(spec, tmp_path, run, 5, timeout=400)
    assert json.loads((run / "status.json").read_text())["state"] != "completed"
    resumed = rmspec("run", "--resume", str(run), cwd=tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert json.loads((run / "status.json").read_text())["resumed"] is True

    reference = {r["step"]: r for r in metrics_rows(tmp_path / "runs" / "ref") if "train/sft/reward" in r}
    got = [r for r in metrics_rows(run) if "train/sft/reward" in r]
    assert sorted(r["step"] for r in got) == list(range(1, 11))  # each step once, none lost or repeated
    for row in got:
        for key in COMPARED:
            assert row[key] == pytest.approx(reference[row["step"]][key], rel=1e-4, abs=1e-6), (row["step"], key)
    final = lambda path: [r for r in metrics_rows(path) if "eval/sft/verdict_accuracy" in r][-1]  # noqa: E731
    assert final(run)["eval/sft/verdict_accuracy"] == final(tmp_path / "runs" / "ref")["eval/sft/verdict_accuracy"]
