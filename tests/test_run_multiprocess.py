"""Bradley-Terry with 2 CPU processes through `accelerate launch` (MULTI_CPU over gloo), with the
plan's global batch split over them."""

from __future__ import annotations

import json
import math

from helpers.runs import make_run_spec, rmspec


def test_two_cpu_processes_train_with_the_plans_global_batch(tmp_path):
    spec = make_run_spec(tmp_path, name="ddp", training="  epochs: 1", batch=8, procs=2, rows=100)
    done = rmspec("run", str(spec), cwd=tmp_path, timeout=600)
    run = tmp_path / "runs" / "ddp"
    assert done.returncode == 0, done.stdout + done.stderr + (run / "train.log").read_text()
    plan = json.loads((run / "plan.json").read_text())
    status = json.loads((run / "status.json").read_text())
    assert plan["num_processes"] == 2
    assert status["world_size"] == 2
    assert status["global_batch_size"] == plan["global_batch_size"] == 8
    assert status["micro_batch_size"] * status["gradient_accumulation_steps"] * 2 == 8
    # One epoch of the training split at 8 pairs per optimizer step.
    assert status["max_steps"] == math.ceil(status["train_rows"] / 8)
    assert status["step"] == status["max_steps"]
    assert status["metrics"]["eval/rm/accuracy"] > 0.6
    # Only rank 0 wrote the shared files: one train_begin event in metrics.jsonl.
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum(r.get("event") == "train_begin" for r in rows) == 1
