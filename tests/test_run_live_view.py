"""The live view's arithmetic (progress, ETA, throughput) and its metrics.jsonl follower;
hub upload errors that lose nothing."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rmspec.errors import RunError
from rmspec.render.live_view import MetricsFollower, RunProgress, format_seconds


def test_progress_folds_rows_and_estimates_the_time_left():
    p = RunProgress()
    p.update({"event": "train_begin", "step": 0, "max_steps": 100, "time": 1000.0})
    p.update(
        {
            "step": 10,
            "max_steps": 100,
            "train/rm/loss": 0.6,
            "train/rm/accuracy": 0.7,
            "train/rm/lr": 1e-4,
            "samples_per_second": 8.0,
            "time": 1020.0,
        }
    )
    assert p.seconds_per_step() == pytest.approx(2.0)
    assert p.eta_seconds() == pytest.approx(180.0)
    line = p.line()
    assert "step 10/100" in line and "loss 0.6" in line and "acc 0.7" in line and "ETA 3:00" in line
    p.update({"step": 10, "eval/rm/accuracy": 0.8, "time": 1021.0})
    assert "eval acc 0.8" in p.line()


def test_progress_after_a_resume_counts_speed_from_the_resume_point():
    p = RunProgress()
    p.update({"event": "train_begin", "step": 50, "max_steps": 100, "time": 0.0})
    p.update({"step": 60, "time": 5.0})
    assert p.seconds_per_step() == pytest.approx(0.5)
    assert format_seconds(3725) == "1:02:05"


def test_follower_reads_only_complete_new_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    follower = MetricsFollower(path)
    assert follower.new_rows() == []
    path.write_text(json.dumps({"step": 1}) + "\n" + '{"step": 2')
    assert follower.new_rows() == [{"step": 1}]
    with path.open("a") as handle:
        handle.write('}\n{"step": 3}\n')
    assert follower.new_rows() == [{"step": 2}, {"step": 3}]
    path.write_text(json.dumps({"step": 1}) + "\n")  # rewritten shorter on resume
    assert follower.new_rows() == [{"step": 1}]


def _spec(env: str):
    return SimpleNamespace(name="x", output=SimpleNamespace(hub_token_env=env, hub_repo_id="me/rm", private=True))


def test_push_without_a_token_is_a_clear_error_and_keeps_the_model(tmp_path, monkeypatch):
    from rmspec.rundir import RunDir
    from rmspec.train.finish import push_to_hub

    run = RunDir(tmp_path)
    run.model.mkdir()
    (run.model / "config.json").write_text("{}")
    monkeypatch.delenv("RMSPEC_TEST_TOKEN", raising=False)
    with pytest.raises(RunError) as err:
        push_to_hub(run, _spec("RMSPEC_TEST_TOKEN"))
    assert "RMSPEC_TEST_TOKEN" in err.value.message and str(run.model) in err.value.message
    assert "hf upload me/rm" in err.value.hint
    # With a token but no network (offline mode here): an error naming the target, model untouched.
    monkeypatch.setenv("RMSPEC_TEST_TOKEN", "hf_fake")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RunError) as err:
        push_to_hub(run, _spec("RMSPEC_TEST_TOKEN"))
    assert "me/rm" in err.value.message
    assert (run.model / "config.json").read_text() == "{}"
