"""The strategy guard: the launched run checks, before its first step, that what accelerate set up is
what the plan says, and stops (exit 1) when it is not.

The plan is a promise that only the running processes can check. accelerate does not refuse a run
that differs from its config: an FSDP config on CPU processes runs as MULTI_CPU (DDP) with no warning,
and processes that find no usable backend each run alone (world size 1), N independent copies. A GPU
node whose CUDA is not visible, or a stray ACCELERATE_* / CUDA_VISIBLE_DEVICES variable, pays for that
silently. The guard compares every fact the plan fixed; it has no off switch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rmspec.errors import RunError
from rmspec.plan import Plan

# accelerate's FSDP auto-wrap policy, by the function its plugin holds (before prepare) or wraps (after).
WRAP_POLICIES = {
    "transformer_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    "size_based_auto_wrap_policy": "SIZE_BASED_WRAP",
}


@dataclass(frozen=True)
class Mismatch:
    fact: str
    planned: str
    running: str

    def render(self) -> str:
        return f"{self.fact}: planned {self.planned}, running {self.running}"


class StrategyMismatch(RunError):
    """The running processes are not what the plan says (exit 1)."""

    def __init__(self, mismatches: list[Mismatch]):
        self.mismatches = mismatches
        super().__init__(
            "the run differs from its plan, stopped before the first step: "
            + "; ".join(m.render() for m in mismatches),
            hint=hint_for(mismatches),
        )


def planned_facts(plan: Plan) -> dict[str, str]:
    config = plan.accelerate_config
    distributed = str(config["distributed_type"])
    if plan.uses_cpu and distributed == "MULTI_GPU":
        distributed = "MULTI_CPU"  # CPU processes go through accelerate's multi-GPU launcher onto gloo
    facts = {
        "distributed type": distributed,
        "world size": str(plan.num_processes),
        "processes per node": str(plan.processes_per_node),
        "mixed precision": plan.mixed_precision,
        "device type": "cuda" if plan.hardware.is_gpu else "cpu",
    }
    fsdp = config.get("fsdp_config")
    if distributed == "FSDP" and fsdp:
        facts.update(
            {
                "FSDP version": str(fsdp["fsdp_version"]),
                "FSDP auto wrap policy": str(fsdp["fsdp_auto_wrap_policy"]),
                "FSDP state dict type": str(fsdp["fsdp_state_dict_type"]),
                "FSDP parameter offload": str(bool(fsdp["fsdp_offload_params"])).lower(),
                "FSDP reshard after forward": str(bool(fsdp["fsdp_reshard_after_forward"])).lower(),
                "FSDP activation checkpointing": str(bool(fsdp["fsdp_activation_checkpointing"])).lower(),
                "FSDP mesh": mesh_fact(config.get("parallelism_config") or {}, plan.num_processes),
            }
        )
    deepspeed = config.get("deepspeed_config")
    if distributed == "DEEPSPEED" and deepspeed:
        facts["DeepSpeed ZeRO stage"] = str(deepspeed["zero_stage"])
    return facts


def running_facts(state: Any, env: Any = None) -> dict[str, str]:
    """The same facts, read from accelerate's AcceleratorState (and torchrun's LOCAL_WORLD_SIZE)."""
    env = os.environ if env is None else env
    distributed = getattr(state.distributed_type, "value", str(state.distributed_type))
    facts = {
        "distributed type": str(distributed),
        "world size": str(state.num_processes),
        "processes per node": local_world_size(env, state.num_processes),
        "mixed precision": str(state.mixed_precision),
        "device type": state.device.type,
    }
    plugin = getattr(state, "fsdp_plugin", None)
    if distributed == "FSDP" and plugin is not None:
        facts.update(
            {
                "FSDP version": str(plugin.fsdp_version),
                "FSDP auto wrap policy": wrap_policy_name(plugin.auto_wrap_policy),
                "FSDP state dict type": getattr(plugin.state_dict_type, "name", str(plugin.state_dict_type)),
                "FSDP parameter offload": str(offloads(plugin)).lower(),
                "FSDP reshard after forward": str(bool(plugin.reshard_after_forward)).lower(),
                "FSDP activation checkpointing": str(bool(plugin.activation_checkpointing)).lower(),
                "FSDP mesh": mesh_fact(running_mesh(state), state.num_processes),
            }
        )
    deepspeed = getattr(state, "deepspeed_plugin", None)
    if distributed == "DEEPSPEED" and deepspeed is not None:
        facts["DeepSpeed ZeRO stage"] = str(deepspeed.zero_stage)
    return facts


def mesh_fact(sizes: dict, world_size: int) -> str:
    """FSDP's data-parallel mesh: replicas x shards (fsdp_hybrid_shard's 2-D mesh; 1 x world: one flat shard)."""
    replicas = int(sizes.get("parallelism_config_dp_replicate_size", 1))
    shards = int(sizes.get("parallelism_config_dp_shard_size", world_size // replicas))
    return f"{replicas} replica{'s' * (replicas != 1)} x {shards} shard{'s' * (shards != 1)}"


def running_mesh(state: Any) -> dict:
    """accelerate's ParallelismConfig (set from the launch's parallelism_config) in the config file's terms."""
    config = getattr(state, "parallelism_config", None)
    if config is None:
        return {}
    return {
        "parallelism_config_dp_replicate_size": config.dp_replicate_size,
        "parallelism_config_dp_shard_size": config.dp_shard_size,
    }


def local_world_size(env: Any, world_size: int) -> str:
    """Processes on this node, as the launcher told them (torchrun; MPI-style launchers); "1" for a
    lone process, "unknown" where no launcher said (compare() then cannot judge it)."""
    for name in ("LOCAL_WORLD_SIZE", "LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"):
        if env.get(name):
            return str(env[name])
    return "1" if world_size == 1 else "unknown"


def wrap_policy_name(policy: Any) -> str:
    if policy is None:
        return "NO_WRAP"
    function = getattr(policy, "func", policy)  # a functools.partial once the model is known
    name = getattr(function, "__name__", type(function).__name__)
    return WRAP_POLICIES.get(name, name)


def offloads(plugin: Any) -> bool:
    from torch.distributed.fsdp import CPUOffloadPolicy

    return isinstance(plugin.cpu_offload, CPUOffloadPolicy) or bool(
        getattr(plugin.cpu_offload, "offload_params", False)
    )


def compare(planned: dict[str, str], running: dict[str, str]) -> list[Mismatch]:
    """Every planned fact that runs otherwise. Strategy details (FSDP_*, ZeRO) are compared only when the
    distributed type itself matches: an FSDP plan running as MULTI_CPU is one mismatch, not seven."""
    out = [
        Mismatch(k, v, running.get(k, "none"))
        for k, v in planned.items()
        if running.get(k, "none") not in (v, "unknown")  # unknown: no launcher said, nothing to judge
    ]
    if running.get("distributed type") == "DEEPSPEED":
        # DeepSpeed keeps the precision in its own config, where the Trainer may leave "auto" until
        # deepspeed.initialize: accelerate's mixed_precision is not yet the truth before the first step.
        out = [m for m in out if m.fact != "mixed precision"]
    if any(m.fact == "distributed type" for m in out):
        out = [m for m in out if not m.fact.startswith(("FSDP ", "DeepSpeed "))]
    return out


def hint_for(mismatches: list[Mismatch]) -> str:
    facts = {m.fact: m for m in mismatches}
    kind = facts.get("distributed type")
    device = facts.get("device type")
    if kind is not None and kind.planned in ("FSDP", "DEEPSPEED") and kind.running in ("MULTI_CPU", "NO"):
        why = "accelerate shards with FSDP/DeepSpeed on GPUs only and runs these CPU processes as DDP"
    elif device is not None:
        why = f"the plan trains on {device.planned} but these processes found {device.running}"
    elif "world size" in facts:
        why = "the processes did not join one process group of the planned size"
    else:
        why = "the launch environment overrides the plan"
    return (
        f"{why}: check CUDA_VISIBLE_DEVICES and ACCELERATE_* variables in the environment, start the run with "
        "`rmspec run RUN/plan.json` (not the entrypoint by hand), or plan for the machine you are on: "
        "`rmspec plan SPEC --set hardware.device=auto --out plan.json`"
    )


def enforce_plan(plan: Plan, state: Any) -> None:
    """Raise StrategyMismatch (exit 1) when the running AcceleratorState differs from the plan."""
    mismatches = compare(planned_facts(plan), running_facts(state))
    if mismatches:
        raise StrategyMismatch(mismatches)
