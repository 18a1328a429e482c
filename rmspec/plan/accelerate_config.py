"""The accelerate config file a plan emits (the YAML `accelerate launch --config_file` reads).

accelerate's own loader checks the top-level keys only; a misspelled nested fsdp_/deepspeed_
key loads silently and is ignored. So every nested key is checked here against the launch
parser's options (the static list below; tests/test_plan_emitters.py holds it equal to
accelerate's parser, so it cannot drift without a failing test).
"""

from __future__ import annotations

import io

from rmspec.errors import PlanError

# Options of `accelerate launch` that an fsdp_config / deepspeed_config key may set
# (accelerate 1.x: fsdp_config keys map to --fsdp_<key>; deepspeed_config keys map as they are).
FSDP_KEYS = frozenset(
    {
        "fsdp_version",
        "fsdp_offload_params",
        "fsdp_min_num_params",
        "fsdp_sharding_strategy",
        "fsdp_reshard_after_forward",
        "fsdp_auto_wrap_policy",
        "fsdp_transformer_layer_cls_to_wrap",
        "fsdp_backward_prefetch",
        "fsdp_state_dict_type",
        "fsdp_forward_prefetch",
        "fsdp_use_orig_params",
        "fsdp_cpu_ram_efficient_loading",
        "fsdp_sync_module_states",
        "fsdp_activation_checkpointing",
        "fsdp_activation_checkpointing_offload",
    }
)
FSDP1_ONLY = frozenset(
    {"fsdp_sharding_strategy", "fsdp_backward_prefetch", "fsdp_forward_prefetch", "fsdp_use_orig_params"}
)
DEEPSPEED_KEYS = frozenset(
    {
        "deepspeed_config_file",
        "zero_stage",
        "offload_optimizer_device",
        "offload_param_device",
        "offload_optimizer_nvme_path",
        "offload_param_nvme_path",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "zero3_init_flag",
        "zero3_save_16bit_model",
        "deepspeed_hostfile",
        "deepspeed_exclusion_filter",
        "deepspeed_inclusion_filter",
        "deepspeed_multinode_launcher",
        "deepspeed_moe_layer_cls_names",
    }
)

# Options of `accelerate launch` that a parallelism_config key may set (accelerate 1.10+, FSDP2 only): rmspec
# writes the data-parallel mesh's two sizes (HSDP); accelerate's own context parallelism (cp_size) is not
# rmspec's (it drops the attention mask), so it is never set here.
PARALLELISM_KEYS = frozenset({"parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size"})

DEFAULT_PORT = 29500
# The FSDP state-dict types with which Trainer.save_model writes model.safetensors (measured on two CPU
# processes: tests/test_fsdp_config.py).
SAVING_STATE_DICT_TYPES = ("FULL_STATE_DICT",)


def build_config(
    *,
    strategy: str,
    mixed_precision: str,
    num_processes: int,
    num_machines: int,
    use_cpu: bool,
    layer_class: str | None,
    checkpointing: bool,
    grad_accum: int,
    max_grad_norm: float,
    replicas: int | None = None,
) -> dict:
    """The config dict for one plan (written as YAML into the run directory). ``replicas``: fsdp_hybrid_shard's
    replicate dimension, the nodes unless given (the processes are split into that many shard groups)."""
    if strategy.startswith("fsdp"):
        # Also on CPU processes, where only a test plans it (the planner's ladder never does): accelerate
        # then runs it as MULTI_CPU (DDP), and rmspec's strategy guard stops the run.
        distributed = "FSDP"
    elif use_cpu:
        # CPU processes: accelerate starts several of them only through its multi-GPU launcher
        # (torchrun); use_cpu (and ACCELERATE_USE_CPU in the launch environment) puts them on gloo.
        distributed = "MULTI_GPU" if num_processes > 1 else "NO"
    elif strategy.startswith("deepspeed"):
        distributed = "DEEPSPEED"
    else:
        distributed = "MULTI_GPU" if num_processes > 1 else "NO"
    config: dict = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": distributed,
        "mixed_precision": mixed_precision,
        "num_processes": num_processes,
        "num_machines": num_machines,
        "machine_rank": 0,
        "main_training_function": "main",
        "rdzv_backend": "c10d" if num_machines > 1 else "static",
        "same_network": num_machines == 1,
        "use_cpu": use_cpu,
        "gpu_ids": "all",
        "downcast_bf16": "no",
        "debug": False,
        "enable_cpu_affinity": False,
    }
    if num_machines == 1 and num_processes > 1:
        config["main_process_port"] = DEFAULT_PORT
    if distributed == "FSDP":
        fsdp = {
            "fsdp_version": 2,
            "fsdp_reshard_after_forward": strategy != "fsdp_shard_grad_op",
            "fsdp_offload_params": strategy == "fsdp_full_shard_offload",
            # FULL_STATE_DICT: Trainer.save_model writes RUN/model from it (see SAVING_STATE_DICT_TYPES).
            "fsdp_state_dict_type": "FULL_STATE_DICT",
            # Rank 0 loads the weights and broadcasts them; without it each rank keeps its own load,
            # and a head or LoRA matrices initialised differently per rank train silently apart.
            # (No fsdp_sync_module_states: FSDP2 ignores it; accelerate reads it for FSDP1 only.)
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_activation_checkpointing": checkpointing,
        }
        if layer_class:
            fsdp["fsdp_auto_wrap_policy"] = "TRANSFORMER_BASED_WRAP"
            fsdp["fsdp_transformer_layer_cls_to_wrap"] = layer_class
        else:
            fsdp["fsdp_auto_wrap_policy"] = "SIZE_BASED_WRAP"
            fsdp["fsdp_min_num_params"] = 100_000_000
        config["fsdp_config"] = fsdp
    if strategy == "fsdp_hybrid_shard":
        config["parallelism_config"] = hybrid_mesh(num_processes, replicas or num_machines)
    if distributed == "DEEPSPEED":
        offload = "cpu" if strategy.endswith("offload") else "none"
        config["deepspeed_config"] = {
            "zero_stage": 2 if strategy == "deepspeed_zero2" else 3,
            "offload_optimizer_device": offload,
            "offload_param_device": offload,
            "zero3_init_flag": strategy != "deepspeed_zero2",
            "zero3_save_16bit_model": strategy != "deepspeed_zero2",
            "gradient_accumulation_steps": grad_accum,
            "gradient_clipping": max_grad_norm,
        }
    check_nested_keys(config)
    check_saves_model(config)
    return config


def hybrid_mesh(num_processes: int, replicas: int) -> dict:
    """HSDP's 2-D mesh in accelerate's terms: ``replicas`` x (num_processes / replicas), ranks laid out row by row,
    so each shard group is one node's consecutive ranks (and holds whole context-parallel groups)."""
    if replicas < 2 or num_processes % replicas or num_processes == replicas:
        raise PlanError(
            f"fsdp_hybrid_shard needs the {num_processes} processes split into at least 2 equal shard groups of at "
            f"least 2, got {replicas}",
            hint="set hardware.nodes above 1, or hardware.strategy: fsdp_full_shard",
        )
    return {
        "parallelism_config_dp_replicate_size": replicas,
        "parallelism_config_dp_shard_size": num_processes // replicas,
    }


def check_saves_model(config: dict) -> None:
    """Refuse an FSDP state-dict type with which `Trainer.save_model` writes no model: under FSDP2,
    SHARDED_STATE_DICT trains and checkpoints, but RUN/model stays empty, without a warning."""
    fsdp = config.get("fsdp_config") or {}
    kind = fsdp.get("fsdp_state_dict_type", "FULL_STATE_DICT")
    if fsdp and kind not in SAVING_STATE_DICT_TYPES:
        raise PlanError(
            f"accelerate config: fsdp_state_dict_type {kind} saves no model with Trainer.save_model",
            hint="plan again with this rmspec (`rmspec plan SPEC --out plan.json`); it writes FULL_STATE_DICT",
        )


def check_nested_keys(config: dict) -> None:
    """Refuse nested keys accelerate's launcher does not know (its loader would ignore them silently)."""
    bad: list[str] = []
    fsdp = config.get("fsdp_config") or {}
    for key in fsdp:
        name = key if key.startswith("fsdp") else "fsdp_" + key
        if name not in FSDP_KEYS:
            bad.append(f"fsdp_config.{key}")
        elif fsdp.get("fsdp_version") == 2 and name in FSDP1_ONLY:
            bad.append(f"fsdp_config.{key} (FSDP1 only; refused with fsdp_version 2)")
    for key in config.get("parallelism_config") or {}:
        if key not in PARALLELISM_KEYS:
            bad.append(f"parallelism_config.{key}")
    for key in config.get("deepspeed_config") or {}:
        if key not in DEEPSPEED_KEYS:
            bad.append(f"deepspeed_config.{key}")
    if bad:
        raise PlanError(
            f"accelerate config has keys accelerate launch does not know: {', '.join(bad)}",
            hint="see `accelerate launch --help` for the fsdp_/deepspeed options",
        )


def to_yaml(config: dict) -> str:
    from ruamel.yaml import YAML

    # accelerate reads this with PyYAML (YAML 1.1), where a bare `no` is a boolean: write YAML 1.1
    # so that strings such as mixed_precision: 'no' come out quoted.
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(config, out)
    return "# Written by `rmspec plan`: the accelerate config for this run.\n" + out.getvalue()
