"""The strategy guard (rmspec/train/strategy_guard.py): a launched run whose processes differ from the
plan stops before its first step with exit 1, and status.json names the planned and the running value.

Each mismatch that can happen on CPU is provoked for real: an FSDP plan that accelerate runs as DDP
(MULTI_CPU: the same plan the FSDP tests run, without the test-only shim), a world size of 1 for a
plan of 2 (the entrypoint started by hand), a precision forced by the environment, and a GPU plan
whose processes find only a CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.fsdp_runs import explain, plan_fsdp_on_cpu, rmspec_run, run_env, status, write_spec
from helpers.models import build_model


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    return root, build_model("llama", root / "model-src")


def _run_dir(spec: Path, sets: tuple[str, ...] = ()) -> Path:
    """The run directory `rmspec run` writes (spec, plan, accelerate config), without launching."""
    from rmspec.launch.prepare import write_run_dir
    from rmspec.plan import compile_plan
    from rmspec.rundir import RunDir
    from rmspec.spec import load_spec

    loaded = load_spec(spec, sets)
    plan = compile_plan(loaded, sets=list(sets))
    run = RunDir(Path(plan.run_dir))
    write_run_dir(run, plan, loaded.document)
    return run.root


def _entrypoint_by_hand(run: Path, **env: str) -> subprocess.CompletedProcess:
    """`python -m rmspec.launch.entrypoint RUN/plan.json`, without accelerate launch."""
    full = {**run_env(shim=False), "ACCELERATE_USE_CPU": "true", **env}
    return subprocess.run(
        [sys.executable, "-m", "rmspec.launch.entrypoint", str(run / "plan.json")],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _refused(run: Path, done: subprocess.CompletedProcess, *expected: str) -> dict:
    assert done.returncode == 1, explain(done, run)
    failed = status(run)
    assert failed["state"] == "failed" and failed["exit_code"] == 1, failed
    assert "differs from its plan" in failed["error"], failed
    for text in expected:
        assert text in failed["error"], (text, failed["error"])
    assert "rmspec plan SPEC --set hardware.device=auto" in failed["hint"]
    assert not (run / "checkpoints").exists() or not any((run / "checkpoints").iterdir())  # no step was taken
    assert "Traceback" not in done.stderr
    return failed


def test_an_fsdp_plan_that_accelerate_runs_as_ddp_is_refused(base):
    """Without the shim, accelerate runs the FSDP plan as MULTI_CPU (DDP) on CPU; the guard stops it."""
    root, model = base
    spec = write_spec(root, model, name="no-shim", steps=2)
    done = rmspec_run(str(plan_fsdp_on_cpu(spec)), cwd=root, env=run_env(shim=False))
    run = root / "runs" / "no-shim"
    failed = _refused(run, done, "distributed type: planned FSDP, running MULTI_CPU")
    assert "shards with FSDP/DeepSpeed on GPUs only" in failed["hint"]
    assert "FSDP version" not in failed["error"]  # one mismatch, not the plugin's details
    assert not (run / "model").exists()


def test_a_world_size_other_than_the_plans_is_refused(base):
    root, model = base
    run = _run_dir(write_spec(root, model, name="world", procs=2))
    done = _entrypoint_by_hand(run)
    _refused(run, done, "world size: planned 2, running 1", "processes per node: planned 2, running 1")


def test_a_precision_other_than_the_plans_is_refused(base):
    root, model = base
    run = _run_dir(write_spec(root, model, name="precision", procs=1))
    done = _entrypoint_by_hand(run, ACCELERATE_MIXED_PRECISION="bf16")
    _refused(run, done, "mixed precision: planned no, running bf16")


def test_a_gpu_plan_on_cpu_processes_is_refused(base):
    root, model = base
    spec = write_spec(root, model, name="device", procs=1)
    run = _run_dir(spec, ("hardware.device=h100-80gb", "hardware.gpus_per_node=1", "model.dtype=float32"))
    done = _entrypoint_by_hand(run, ACCELERATE_USE_CPU="false")
    failed = _refused(run, done, "device type: planned cuda, running cpu")
    assert "the plan trains on cuda but these processes found cpu" in failed["hint"]


def test_a_run_that_is_its_plan_passes_the_guard(base):
    """The same direct start with nothing overridden trains: the guard refuses only real differences."""
    root, model = base
    run = _run_dir(write_spec(root, model, name="same", procs=1, steps=1))
    done = _entrypoint_by_hand(run)
    assert done.returncode == 0, explain(done, run)
    assert status(run)["state"] == "completed"
    assert json.loads((run / "plan.json").read_text())["num_processes"] == 1
    assert os.path.exists(run / "model" / "model.safetensors")


def test_fsdp_details_are_compared_against_accelerates_own_plugin(monkeypatch):
    """The FSDP facts the guard reads from a real FullyShardedDataParallelPlugin, built from the
    environment `accelerate launch` writes for the plan's config; a hand-edited accelerate config (here
    SHARDED_STATE_DICT, no offload, size-based wrap) shows as one mismatch per fact."""
    import types

    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin

    from rmspec.plan.accelerate_config import build_config
    from rmspec.train.strategy_guard import compare, planned_facts, running_facts

    config = build_config(
        strategy="fsdp_full_shard_offload",
        mixed_precision="no",
        num_processes=2,
        num_machines=1,
        use_cpu=True,
        layer_class="LlamaDecoderLayer",
        checkpointing=True,
        grad_accum=1,
        max_grad_norm=1.0,
    )
    plan = types.SimpleNamespace(
        accelerate_config=config,
        uses_cpu=True,
        num_processes=2,
        processes_per_node=2,
        mixed_precision="no",
        hardware=types.SimpleNamespace(is_gpu=False),
    )

    def running(**env: str) -> dict:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        plugin = FullyShardedDataParallelPlugin()
        state = types.SimpleNamespace(
            distributed_type=types.SimpleNamespace(value="FSDP"),
            num_processes=2,
            mixed_precision="no",
            device=torch.device("cpu"),
            fsdp_plugin=plugin,
        )
        return running_facts(state, {"LOCAL_WORLD_SIZE": "2"})

    fsdp = config["fsdp_config"]
    as_launched = {
        "ACCELERATE_USE_FSDP": "true",
        "FSDP_VERSION": "2",
        "FSDP_AUTO_WRAP_POLICY": fsdp["fsdp_auto_wrap_policy"],
        "FSDP_TRANSFORMER_CLS_TO_WRAP": fsdp["fsdp_transformer_layer_cls_to_wrap"],
        "FSDP_STATE_DICT_TYPE": fsdp["fsdp_state_dict_type"],
        "FSDP_OFFLOAD_PARAMS": "true",
        "FSDP_RESHARD_AFTER_FORWARD": "true",
        "FSDP_ACTIVATION_CHECKPOINTING": "true",
    }
    assert compare(planned_facts(plan), running(**as_launched)) == []
    edited = {**as_launched, "FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT", "FSDP_OFFLOAD_PARAMS": "false"}
    edited["FSDP_AUTO_WRAP_POLICY"] = "SIZE_BASED_WRAP"
    found = {m.fact: (m.planned, m.running) for m in compare(planned_facts(plan), running(**edited))}
    assert found == {
        "FSDP state dict type": ("FULL_STATE_DICT", "SHARDED_STATE_DICT"),
        "FSDP parameter offload": ("true", "false"),
        "FSDP auto wrap policy": ("TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP"),
    }


def test_an_fsdp_plan_running_as_ddp_is_the_distributed_type_mismatch_and_only_that(monkeypatch):
    """The reason, by its code (the mismatch's fact), not its message: accelerate's MULTI_CPU state for
    an FSDP plan gives exactly one mismatch, `distributed type` FSDP -> MULTI_CPU, and enforce_plan
    raises it with exit code 1 (without the distributed-type check it would pass or report details)."""
    import types

    import torch

    from rmspec.plan.accelerate_config import build_config
    from rmspec.train.strategy_guard import StrategyMismatch, compare, enforce_plan, planned_facts, running_facts

    config = build_config(
        strategy="fsdp_full_shard",
        mixed_precision="no",
        num_processes=2,
        num_machines=1,
        use_cpu=True,
        layer_class="LlamaDecoderLayer",
        checkpointing=False,
        grad_accum=1,
        max_grad_norm=1.0,
    )
    plan = types.SimpleNamespace(
        accelerate_config=config,
        uses_cpu=True,
        num_processes=2,
        processes_per_node=2,
        mixed_precision="no",
        hardware=types.SimpleNamespace(is_gpu=False),
    )
    as_ddp = types.SimpleNamespace(  # what accelerate builds for that config on CPU: DDP over gloo
        distributed_type=types.SimpleNamespace(value="MULTI_CPU"),
        num_processes=2,
        mixed_precision="no",
        device=torch.device("cpu"),
        fsdp_plugin=None,
    )
    found = compare(planned_facts(plan), running_facts(as_ddp, {"LOCAL_WORLD_SIZE": "2"}))
    assert [(m.fact, m.planned, m.running) for m in found] == [("distributed type", "FSDP", "MULTI_CPU")]
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(StrategyMismatch) as raised:
        enforce_plan(plan, as_ddp)
    assert [m.fact for m in raised.value.mismatches] == ["distributed type"] and raised.value.exit_code == 1
