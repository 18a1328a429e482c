"""A real launch: a plan for 2 CPU processes runs through `accelerate launch` with its emitted config and argv.

The plan's argv is used as emitted, with only the module after -m swapped for a probe
(tests/test_plan_launch_probe.py) until the training entrypoint is what runs; the probe
all-reduces over gloo and reports the world size it saw.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from rmspec.plan import compile_plan, write_launch_files
from rmspec.plan.argv import resolve_program, with_module
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_cpu_processes_through_accelerate_launch(tmp_path):
    sets = ["hardware.device=cpu", "hardware.gpus_per_node=2", "hardware.cpu_memory_gb=16"]
    plan = compile_plan(
        load_spec(REPO / "specs" / "quickstart.yaml", sets), host=HostFacts((), 16.0, (), 2), sets=sets
    ).to_json()
    assert plan["num_processes"] == 2 and plan["strategy"] == "ddp"
    plan["accelerate_config"]["main_process_port"] = _free_port()  # the port is this machine's business
    run = write_launch_files(plan, tmp_path)
    assert run.accelerate_config.exists() and run.plan.exists()

    out = tmp_path / "seen"
    out.mkdir()
    argv = with_module(plan["launch_command"], "test_plan_launch_probe", [plan["run_dir"] + "/plan.json", str(out)])
    env = dict(os.environ, **plan["launch_env"], PYTHONPATH=str(Path(__file__).parent), OMP_NUM_THREADS="1")
    done = subprocess.run(resolve_program(argv), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]

    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    for rank, s in enumerate(seen):
        assert s["rank"] == rank
        assert s["world_size"] == 2 == s["plan_num_processes"]
        assert s["backend"] == "gloo" and s["device"].startswith("cpu")
        assert s["all_reduce"] == 3.0  # 1 + 2
        assert "MULTI_CPU" in s["distributed_type"]
        assert s["mixed_precision"] == "no" == plan["accelerate_config"]["mixed_precision"]
