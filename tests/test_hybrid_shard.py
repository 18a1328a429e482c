"""hardware.strategy: fsdp_hybrid_shard (HSDP, FSDP2 on a 2-D mesh of nodes x processes per node): what the spec
accepts, what the plan sizes and emits, and what the strategy guard compares. The run itself (4 CPU processes
standing for 2 nodes of 2, each row split over a node) is tests/test_fsdp_variants.py; the figures here are
computed from the formulas, not read from the modules."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers import REPO
from rmspec.errors import PlanError
from rmspec.plan import accelerate_config as accel
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec
from rmspec.train.strategy_guard import compare, planned_facts, running_facts

HOST = HostFacts(cpu_bf16_flags=(), ram_gb=64.0, gpus=(), cpu_count=8)
SPEC = REPO / "specs" / "ultrafeedback_bt.yaml"  # an 8B reward model on 2 nodes of 8 A100s


def plan(*sets: str):
    return compile_plan(load_spec(SPEC, list(sets)), host=HOST, sets=list(sets))


@pytest.fixture(scope="module")
def plans():
    return {s: plan(f"hardware.strategy={s}") for s in ("fsdp_full_shard", "fsdp_hybrid_shard")}


def test_one_node_is_refused_at_validate_with_what_to_set(cli):
    done = cli("validate", SPEC, "--set", "hardware.nodes=1", "--set", "hardware.strategy=fsdp_hybrid_shard")
    assert done.code == 2 and "Traceback" not in done.err
    assert "on one node it is fsdp_full_shard" in done.out + done.err
    assert "hardware.nodes above 1" in done.out + done.err


def test_one_process_a_node_is_refused_at_validate(cli):
    done = cli("validate", SPEC, "--set", "hardware.gpus_per_node=1", "--set", "hardware.strategy=fsdp_hybrid_shard")
    assert done.code == 2 and "Traceback" not in done.err
    assert "nothing to shard" in done.out + done.err and "fsdp_full_shard" in done.out + done.err


def test_the_state_is_sharded_within_a_node_only(plans):
    full, hybrid = plans["fsdp_full_shard"], plans["fsdp_hybrid_shard"]
    assert (full.num_processes, full.num_machines, full.processes_per_node) == (16, 2, 8)
    for part in ("weights", "gradients", "optimizer"):
        # 1/8 of the state against 1/16: twice full shard's, within the plan's rounding to 0.01 GB
        assert hybrid.memory_per_device_gb[part] == pytest.approx(2 * full.memory_per_device_gb[part], abs=0.02)
    assert full.memory_per_device_gb["weights"] > 0.5
    assert "2 replicas x 8 shards" in hybrid.strategy_reason


def test_the_accelerate_config_holds_the_mesh_and_the_launch_is_unchanged(plans):
    full, hybrid = plans["fsdp_full_shard"], plans["fsdp_hybrid_shard"]
    assert hybrid.accelerate_config["parallelism_config"] == {
        "parallelism_config_dp_replicate_size": 2,
        "parallelism_config_dp_shard_size": 8,
    }
    assert "parallelism_config" not in full.accelerate_config
    assert hybrid.accelerate_config["fsdp_config"] == full.accelerate_config["fsdp_config"]
    assert hybrid.launch_command == full.launch_command  # the mesh travels in the config file


def test_parallelism_keys_are_the_launchers_own_and_a_typo_is_refused():
    from accelerate.commands.launch import launch_command_parser

    dests = {action.dest for action in launch_command_parser()._actions}
    assert dests >= accel.PARALLELISM_KEYS
    config = accel.build_config(
        strategy="fsdp_hybrid_shard",
        mixed_precision="bf16",
        num_processes=16,
        num_machines=2,
        use_cpu=False,
        layer_class="LlamaDecoderLayer",
        checkpointing=False,
        grad_accum=1,
        max_grad_norm=1.0,
    )
    config["parallelism_config"]["parallelism_config_dp_replicate"] = 2  # accelerate would ignore it silently
    with pytest.raises(PlanError, match="parallelism_config.parallelism_config_dp_replicate"):
        accel.check_nested_keys(config)
    with pytest.raises(PlanError, match="at least 2 equal shard groups"):
        accel.hybrid_mesh(16, 3)
    with pytest.raises(PlanError, match="groups of at least 2"):
        accel.hybrid_mesh(2, 2)  # one process a shard group: accelerate finds nothing to shard


def test_communication_adds_the_gradient_shards_all_reduce_across_nodes(plans):
    hybrid = plans["fsdp_hybrid_shard"]
    n, r = 8, 2
    params, trained = hybrid.model.num_parameters, hybrid.model.trainable_parameters
    within = (n - 1) / n * (2 * params + trained) * 2  # two bf16 gathers, one reduce-scatter, in the node
    across = 2 * (r - 1) / r * trained / n * 2  # each process's gradient shard, all-reduced across nodes
    moved = (within + across) * hybrid.gradient_accumulation_steps
    comm = hybrid.estimate["communication"]
    assert comm["bytes_per_step"] == pytest.approx(moved, rel=1e-9)
    assert "across nodes" in comm["pattern"]


def test_two_links_time_the_gathers_in_the_node_and_the_rest_between_nodes():
    """interconnect nvlink (450 GB/s) within a node, interconnect_between_nodes infiniband (50 GB/s): HSDP's
    gathers at the node's link and its all-reduce between nodes; full shard's one ring over all 16 processes
    crosses nodes, so it runs at infiniband's rate; with one link named, both run at it, as before."""
    links = ("hardware.interconnect=nvlink", "hardware.interconnect_between_nodes=infiniband")
    n, r = 8, 2
    hybrid = plan("hardware.strategy=fsdp_hybrid_shard", *links)
    params, trained = hybrid.model.num_parameters, hybrid.model.trainable_parameters
    steps = hybrid.gradient_accumulation_steps
    within = (n - 1) / n * (2 * params + trained) * 2 * steps
    across = 2 * (r - 1) / r * trained / n * 2 * steps
    comm = hybrid.estimate["communication"]
    assert comm["seconds_per_step"] == pytest.approx(within / 450e9 + across / 50e9, abs=1e-4)
    assert comm["interconnect"] == "nvlink within nodes, infiniband between them"
    flat = plan("hardware.strategy=fsdp_full_shard", *links).estimate["communication"]
    assert flat["seconds_per_step"] == pytest.approx(flat["bytes_per_step"] / 50e9, abs=1e-4)
    assert flat["bandwidth_gb_per_s"] == 50.0
    one_link = plan("hardware.strategy=fsdp_hybrid_shard", "hardware.interconnect=nvlink").estimate["communication"]
    assert one_link["seconds_per_step"] == pytest.approx(one_link["bytes_per_step"] / 450e9, abs=1e-4)
    assert flat["seconds_per_step"] > 5 * comm["seconds_per_step"]  # what HSDP buys on these links


def test_a_link_between_nodes_on_one_node_is_refused_at_validate(cli):
    sets = ["--set", "hardware.nodes=1", "--set", "hardware.interconnect_between_nodes=infiniband"]
    done = cli("validate", SPEC, *sets)
    assert done.code == 2 and "Traceback" not in done.err
    assert "nodes is 1" in done.out + done.err and "remove it" in done.out + done.err


def test_context_parallel_trains_under_it(plans):
    split = plan("hardware.strategy=fsdp_hybrid_shard", "hardware.context_parallel=2")
    assert split.context_parallel["degree"] == 2 and split.context_parallel["run_refused"] is None


def _state(plan_, mesh):
    """An AcceleratorState's facts as the guard reads them, with accelerate's ParallelismConfig or none."""
    from accelerate.parallelism_config import ParallelismConfig

    fsdp = plan_.accelerate_config["fsdp_config"]
    plugin = SimpleNamespace(
        fsdp_version=2,
        auto_wrap_policy=None,
        state_dict_type=SimpleNamespace(name=fsdp["fsdp_state_dict_type"]),
        cpu_offload=None,
        reshard_after_forward=fsdp["fsdp_reshard_after_forward"],
        activation_checkpointing=fsdp["fsdp_activation_checkpointing"],
    )
    return SimpleNamespace(
        distributed_type=SimpleNamespace(value="FSDP"),
        num_processes=plan_.num_processes,
        mixed_precision=plan_.mixed_precision,
        device=SimpleNamespace(type="cuda"),
        fsdp_plugin=plugin,
        parallelism_config=None
        if mesh is None
        else ParallelismConfig(dp_replicate_size=mesh[0], dp_shard_size=mesh[1]),
    )


def test_the_guard_compares_the_running_mesh_with_the_plans(plans):
    hybrid, full = plans["fsdp_hybrid_shard"], plans["fsdp_full_shard"]
    env = {"LOCAL_WORLD_SIZE": "8"}
    assert planned_facts(hybrid)["FSDP mesh"] == "2 replicas x 8 shards"
    assert planned_facts(full)["FSDP mesh"] == "1 replica x 16 shards"
    mesh = [m for m in compare(planned_facts(hybrid), running_facts(_state(hybrid, (2, 8)), env)) if "mesh" in m.fact]
    assert mesh == []
    flat = compare(planned_facts(hybrid), running_facts(_state(hybrid, None), env))
    assert [m.render() for m in flat if "mesh" in m.fact] == [
        "FSDP mesh: planned 2 replicas x 8 shards, running 1 replica x 16 shards"
    ]
    stray = compare(planned_facts(full), running_facts(_state(full, (2, 8)), env))
    assert [m.render() for m in stray if "mesh" in m.fact] == [
        "FSDP mesh: planned 1 replica x 16 shards, running 2 replicas x 8 shards"
    ]
