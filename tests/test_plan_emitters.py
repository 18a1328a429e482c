"""Emitters: the accelerate config (through accelerate's own loader, launcher and plugins), argv and SLURM."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmspec.errors import PlanError
from rmspec.plan import accelerate_config as accel
from rmspec.plan import compile_plan
from rmspec.plan.argv import launch_argv, resolve_program, with_module
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

SPECS = Path(__file__).resolve().parents[1] / "specs"
HOST = HostFacts((), 64.0, (), 8)


def _plan(spec, *sets):
    return compile_plan(load_spec(SPECS / spec, list(sets)), host=HOST).to_json()


def _config(strategy, **kw):
    args = dict(
        strategy=strategy,
        mixed_precision="bf16",
        num_processes=8,
        num_machines=1,
        use_cpu=False,
        layer_class="LlamaDecoderLayer",
        checkpointing=True,
        grad_accum=4,
        max_grad_norm=1.0,
    )
    args.update(kw)
    return accel.build_config(**args)


def _through_accelerate(config: dict, tmp_path: Path, monkeypatch):
    """Load the YAML as `accelerate launch` does and return the environment its launcher gives the children."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    path = tmp_path / "accelerate_config.yaml"
    path.write_text(accel.to_yaml(config))
    loaded = load_config_from_file(str(path))
    assert loaded.distributed_type.value == config["distributed_type"]
    argv = launch_argv(path, tmp_path / "plan.json")
    args = launch_command_parser().parse_args(argv[2:])
    args, _, _ = _validate_launch_command(args)
    if config["distributed_type"] == "DEEPSPEED":
        args.deepspeed_fields_from_accelerate_config = ",".join(loaded.deepspeed_config)  # as launch_command sets it
        _, env = prepare_deepspeed_cmd_env(args)
    else:
        env = prepare_multi_gpu_env(args)
    for key, value in env.items():
        if key.startswith(("ACCELERATE_", "FSDP_")):
            monkeypatch.setenv(key, value)
    return loaded, args


@pytest.mark.parametrize("strategy", ["fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_full_shard_offload"])
def test_fsdp_config_builds_accelerates_fsdp2_plugin(strategy, tmp_path, monkeypatch):
    from accelerate.utils import FullyShardedDataParallelPlugin

    config = _config(strategy)
    _, args = _through_accelerate(config, tmp_path, monkeypatch)
    assert args.use_fsdp and args.num_processes == 8
    plugin = FullyShardedDataParallelPlugin()  # reads what the launcher exported
    assert plugin.fsdp_version == 2
    assert plugin.reshard_after_forward is (strategy != "fsdp_shard_grad_op")
    assert plugin.transformer_cls_names_to_wrap == ["LlamaDecoderLayer"]
    assert (type(plugin.cpu_offload).__name__ == "CPUOffloadPolicy") is (strategy == "fsdp_full_shard_offload")
    assert plugin.activation_checkpointing is True


@pytest.mark.parametrize(
    "strategy,stage", [("deepspeed_zero2", 2), ("deepspeed_zero3", 3), ("deepspeed_zero3_offload", 3)]
)
def test_deepspeed_config_reaches_the_plugin(strategy, stage, tmp_path, monkeypatch):
    config = _config(strategy)
    loaded, args = _through_accelerate(config, tmp_path, monkeypatch)
    assert loaded.deepspeed_config["zero_stage"] == stage
    assert os.environ["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == str(stage)
    offload = "cpu" if strategy.endswith("offload") else "none"
    assert os.environ["ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"] == offload
    assert os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] == "4"
    from accelerate.utils import DeepSpeedPlugin

    plugin = DeepSpeedPlugin()  # reads what the launcher exported (DeepSpeed itself need not be installed)
    zero = plugin.deepspeed_config["zero_optimization"]
    assert plugin.zero_stage == stage == zero["stage"]
    assert zero["offload_param"]["device"] == zero["offload_optimizer"]["device"] == offload
    assert zero["stage3_gather_16bit_weights_on_model_save"] is (stage == 3)
    assert plugin.deepspeed_config["gradient_accumulation_steps"] == 4
    assert plugin.deepspeed_config["gradient_clipping"] == 1.0


def test_cpu_processes_go_through_the_multi_process_launcher(tmp_path, monkeypatch):
    config = _config("ddp", use_cpu=True, num_processes=2, mixed_precision="no")
    assert config["distributed_type"] == "MULTI_GPU" and config["use_cpu"] is True
    _, args = _through_accelerate(config, tmp_path, monkeypatch)
    assert args.multi_gpu and args.num_processes == 2  # torchrun with 2 processes, gloo once ACCELERATE_USE_CPU


def test_nested_keys_match_accelerates_launch_options():
    from accelerate.commands.launch import launch_command_parser

    dests = {action.dest for action in launch_command_parser()._actions}
    assert accel.FSDP_KEYS == {d for d in dests if d.startswith("fsdp_")}  # noqa: SIM300 (the constant under test reads first)
    assert accel.DEEPSPEED_KEYS <= dests  # noqa: SIM300 (the constant under test reads first)


def test_bogus_nested_keys_are_refused():
    config = _config("fsdp_full_shard")
    config["fsdp_config"]["fsdp_reshard_after_foward"] = True  # the typo accelerate would load silently
    with pytest.raises(PlanError, match="fsdp_reshard_after_foward"):
        accel.check_nested_keys(config)
    config = _config("fsdp_full_shard")
    config["fsdp_config"]["fsdp_sharding_strategy"] = "FULL_SHARD"
    with pytest.raises(PlanError, match="FSDP1 only"):
        accel.check_nested_keys(config)
    config = _config("deepspeed_zero3")
    config["deepspeed_config"]["zero_stag"] = 3
    with pytest.raises(PlanError, match="zero_stag"):
        accel.check_nested_keys(config)


def test_launch_argv_shape():
    p = _plan("hh_bt.yaml")
    assert p["launch_command"] == [
        "accelerate",
        "launch",
        "--config_file",
        "runs/hh-bt/accelerate_config.yaml",
        "-m",
        "rmspec.launch.entrypoint",
        "runs/hh-bt/plan.json",
    ]
    swapped = with_module(p["launch_command"], "probe", ["x"])
    assert swapped[-3:] == ["-m", "probe", "x"] and swapped[:4] == p["launch_command"][:4]
    assert Path(resolve_program(p["launch_command"])[0]).name == "accelerate"


def test_one_process_runs_the_entrypoint_without_a_launcher():
    """One CPU process (distributed type NO): `python -m` the entrypoint, `python` being this interpreter;
    its environment still tells the process it is a CPU run. A two-process plan keeps accelerate launch."""
    p = _plan("quickstart.yaml")
    assert p["num_processes"] == 1 and p["accelerate_config"]["distributed_type"] == "NO"
    assert p["launch_command"] == ["python", "-m", "rmspec.launch.entrypoint", "runs/quickstart/plan.json"]
    assert p["launch_env"] == {"ACCELERATE_USE_CPU": "true"}
    assert resolve_program(p["launch_command"])[0] == sys.executable
    two = _plan("quickstart.yaml", "hardware.gpus_per_node=2")
    assert two["launch_command"][:2] == ["accelerate", "launch"]


def test_files_the_run_writes():
    from rmspec.rundir import RunDir

    p = _plan("hh_bt.yaml")
    assert p["files"] == [str(f) for f in RunDir(Path("runs/hh-bt")).files()]


def test_multi_node_plan_has_a_slurm_script(tmp_path):
    p = _plan("ultrafeedback_bt.yaml")
    script = p["slurm_script"]
    assert p["num_machines"] == 2 and p["num_processes"] == 16
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p' in script
    assert "NodeAddr=" in script  # node names need not resolve: the head's address as SLURM knows it
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
    assert "#SBATCH --gpus-per-node=8" in script
    assert "srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c node_task" in script
    for flag in (
        "exec accelerate launch",
        "--num_processes 16",
        "--num_machines 2",
        "--rdzv_backend c10d",
        '--machine_rank "$SLURM_NODEID"',
        '--rdzv_conf "is_host=$IS_HEAD"',
        '--main_process_ip "$HEAD_NODE"',
        '--main_process_port "$HEAD_PORT"',
    ):
        assert flag in script
    assert p["accelerate_config"]["rdzv_backend"] == "c10d"
    assert p["submit_command"] == ["sbatch", "runs/ultrafeedback-bt/launch.slurm"]
    assert "runs/ultrafeedback-bt/launch.slurm" in p["files"]
    path = tmp_path / "launch.slurm"
    path.write_text(script)
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def test_write_launch_files_for_several_nodes(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    from rmspec.plan import load_plan, write_launch_files

    p = _plan("ultrafeedback_bt.yaml")
    run = write_launch_files(p, tmp_path)
    assert (run.root / "launch.slurm").read_text() == p["slurm_script"]
    assert load_config_from_file(str(run.accelerate_config)).num_machines == 2
    assert load_plan(run.plan) == p


def test_ctrl_c_goes_to_the_trainers_never_to_the_accelerate_launcher():
    """`rmspec run` forwards Ctrl-C to the processes that train: the direct child of a one-process run, the
    workers under `accelerate launch`, but not the launcher, whose command line also names the entrypoint
    (it would tear the workers down before they save)."""
    from rmspec.launch.local import is_trainer

    direct = ["/venv/bin/python", "-m", "rmspec.launch.entrypoint", "runs/x/plan.json"]
    launcher = ["/venv/bin/python", "/venv/bin/accelerate", "launch", "--config_file", "c.yaml", "-m"]
    launcher += ["rmspec.launch.entrypoint", "runs/x/plan.json"]
    worker = ["/venv/bin/python", "-u", "-m", "rmspec.launch.entrypoint", "runs/x/plan.json"]
    assert is_trainer(direct) and is_trainer(worker) and not is_trainer(launcher)
    assert not is_trainer(["/venv/bin/python", "-m", "rmspec", "run", "spec.yaml"])
