"""The typed run directory: Plan and Status round trips, the one checkpoint rule."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rmspec.errors import PlanError
from rmspec.plan import Plan
from rmspec.rundir import (
    RunDir,
    Status,
    last_complete_checkpoint,
    read_status,
    update_status,
    write_status,
)

GOLDEN = Path(__file__).parent / "golden" / "plans"


# A training plan is a Plan; an approach with its own document (composite) plans something else,
# held by the same golden folder and checked in test_plan_golden.
TRAINING_PLANS = [p for p in sorted(GOLDEN.glob("*.json")) if "schema_version" in json.loads(p.read_text())]


def test_every_golden_plan_but_the_own_document_ones_is_a_training_plan():
    others = {p.stem for p in GOLDEN.glob("*.json")} - {p.stem for p in TRAINING_PLANS}
    assert len(TRAINING_PLANS) >= 10 and others == {"composite_math"}


@pytest.mark.parametrize("path", TRAINING_PLANS, ids=lambda p: p.stem)
def test_plan_from_json_to_json_is_the_identity_on_every_golden_plan(path):
    text = path.read_text()
    plan = Plan.from_json(json.loads(text))
    assert json.dumps(plan.to_json(), indent=2) + "\n" == text  # same keys, same order, same bytes
    assert Plan.from_json(plan.to_json()) == plan
    assert plan.hardware.is_gpu == json.loads(text)["hardware"]["is_gpu"]


def test_plan_refuses_a_renamed_missing_or_foreign_key():
    data = json.loads((GOLDEN / "quickstart.json").read_text())
    renamed = dict(data)
    renamed["compute_precision"] = renamed.pop("precision")
    with pytest.raises(PlanError, match="missing: precision.*unknown: compute_precision"):
        Plan.from_json(renamed)
    with pytest.raises(PlanError, match="schema_version"):
        Plan.from_json({**data, "schema_version": 2})
    with pytest.raises(PlanError, match="not an rmspec plan"):
        Plan.from_json([])  # type: ignore[arg-type]


def test_step_separator_is_written_only_for_process_models():
    bt = Plan.from_json(json.loads((GOLDEN / "quickstart.json").read_text()))
    prm = Plan.from_json(json.loads((GOLDEN / "quickstart_prm.json").read_text()))
    assert "step_separator" not in bt.to_json()
    assert prm.step_separator is not None and prm.to_json()["step_separator"] == prm.step_separator


def test_status_write_merges_keeps_order_and_is_atomic(tmp_path):
    run = RunDir(tmp_path)
    assert read_status(run) == Status()  # nothing written yet
    update_status(run, state="submitted", slurm_job_id="7", submitted=1.0)
    write_status(run, "running", pid=42, host="h", custom_key=[1])
    on_disk = json.loads(run.status.read_text())
    assert list(on_disk) == ["state", "slurm_job_id", "submitted", "updated", "pid", "host", "custom_key"]
    assert on_disk["state"] == "running" and on_disk["custom_key"] == [1] and on_disk["slurm_job_id"] == "7"
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temporary left behind

    write_status(run, "failed", error="boom", hint="fix it", exit_code=2)
    failed = read_status(run)
    assert (failed.state, failed.error, failed.exit_code, failed.pid) == ("failed", "boom", 2, 42)
    write_status(run, "running")  # a resume: the old failure is not the new state
    resumed = json.loads(run.status.read_text())
    assert "error" not in resumed and resumed["hint"] == "fix it" and resumed["exit_code"] == 2


def test_status_keeps_explicit_nulls_and_reads_the_old_status_key(tmp_path):
    run = RunDir(tmp_path)
    write_status(run, "completed", push_error=None, evaluation="done")
    assert json.loads(run.status.read_text())["push_error"] is None  # present, null: as written
    status = read_status(run)
    assert status.get("push_error", "absent") is None and status.get("checkpoint", "absent") == "absent"
    run.status.write_text(json.dumps({"status": "completed"}))
    assert read_status(run).shown_state == "completed" and read_status(run).state is None
    run.status.write_text("{cut sh")
    assert read_status(run) == Status()


def test_status_write_interrupted_keeps_the_old_file(tmp_path, monkeypatch):
    run = RunDir(tmp_path)
    write_status(run, "running", pid=1)
    before = run.status.read_text()

    def boom(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        write_status(run, "completed")
    assert run.status.read_text() == before


def _checkpoint(folder: Path, step: int, complete: bool) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / "trainer_state.json").write_text("{}")
    return path


def test_last_complete_checkpoint_one_rule_removal_only_when_asked(tmp_path):
    folder = tmp_path / "checkpoints"
    assert last_complete_checkpoint(folder, remove_partial=True) is None  # no folder yet
    _checkpoint(folder, 2, True)
    good = _checkpoint(folder, 10, True)
    partial = _checkpoint(folder, 12, False)
    (folder / "checkpoint-x").mkdir()
    assert last_complete_checkpoint(folder, remove_partial=False) == str(good)
    assert partial.exists()  # a reader (rmspec status) deletes nothing
    assert last_complete_checkpoint(folder, remove_partial=True) == str(good)
    assert not partial.exists() and (folder / "checkpoint-x").exists()
