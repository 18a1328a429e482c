"""What the FSDP runs on two CPU processes found in the emitted accelerate config, held by tests:
- fsdp_sync_module_states is inert under FSDP2 (accelerate reads it for FSDP1 only): not emitted;
  fsdp_cpu_ram_efficient_loading (rank 0's weights broadcast to every rank) is;
- SHARDED_STATE_DICT trains, but Trainer.save_model then writes no model: the planner never emits it,
  and a config that names it is refused.
"""

from __future__ import annotations

import pytest

from helpers.fsdp_runs import explain, plan_fsdp_on_cpu, rmspec_run, run_env, write_spec
from helpers.models import build_model
from rmspec.errors import PlanError
from rmspec.plan.accelerate_config import build_config, check_saves_model

FSDP_STRATEGIES = ["fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_full_shard_offload"]


def _config(strategy: str, **kw) -> dict:
    args = dict(
        strategy=strategy,
        mixed_precision="bf16",
        num_processes=8,
        num_machines=1,
        use_cpu=False,
        layer_class="LlamaDecoderLayer",
        checkpointing=False,
        grad_accum=1,
        max_grad_norm=1.0,
    )
    return build_config(**{**args, **kw})


@pytest.mark.parametrize("strategy", FSDP_STRATEGIES)
def test_fsdp2_configs_save_a_full_model_and_broadcast_rank0_weights(strategy):
    fsdp = _config(strategy)["fsdp_config"]
    assert fsdp["fsdp_version"] == 2
    assert fsdp["fsdp_state_dict_type"] == "FULL_STATE_DICT"
    assert fsdp["fsdp_cpu_ram_efficient_loading"] is True
    assert "fsdp_sync_module_states" not in fsdp


@pytest.mark.parametrize("strategy", FSDP_STRATEGIES)
def test_an_fsdp_strategy_is_fsdp_also_for_cpu_processes(strategy):
    """Only a test plans FSDP on CPU; it must then be an FSDP config (which the guard checks), not DDP."""
    config = _config(strategy, use_cpu=True, num_processes=2, mixed_precision="no")
    assert config["distributed_type"] == "FSDP" and config["use_cpu"] is True


@pytest.mark.parametrize("kind", ["SHARDED_STATE_DICT", "LOCAL_STATE_DICT"])
def test_a_state_dict_type_that_saves_no_model_is_refused(kind):
    config = _config("fsdp_full_shard")
    check_saves_model(config)  # FULL_STATE_DICT passes
    config["fsdp_config"]["fsdp_state_dict_type"] = kind
    with pytest.raises(PlanError, match=f"{kind} saves no model"):
        check_saves_model(config)


def test_sharded_state_dict_trains_but_saves_no_model(tmp_path):
    """Why the refusal exists: the same run with SHARDED_STATE_DICT (bypassing the emitter) trains its
    step, and RUN/model holds no weights. If accelerate/transformers start saving here, this fails and
    SAVING_STATE_DICT_TYPES can grow."""
    model = build_model("llama", tmp_path / "model-src")
    spec = write_spec(tmp_path, model, name="sharded-sd", steps=1)
    plan = plan_fsdp_on_cpu(spec, state_dict_type="SHARDED_STATE_DICT")
    done = rmspec_run(str(plan), cwd=tmp_path, env=run_env())
    run = tmp_path / "runs" / "sharded-sd"
    assert (run / "checkpoints" / "checkpoint-1").is_dir(), explain(done, run)  # it trained and checkpointed
    assert not list((run / "model").glob("*.safetensors")), explain(done, run)
    assert done.returncode != 0  # and the run cannot evaluate a model that was never written
