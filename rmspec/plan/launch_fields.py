"""The plan's launch fields (pure, no torch): the accelerate config, the launch command and environment, the
SLURM script of a multi-node plan and its submit command, and the files the run directory will hold."""

from __future__ import annotations

from rmspec.plan import accelerate_config as accel
from rmspec.plan.argv import launch_argv, launch_env, runs_direct
from rmspec.plan.model_shape import ModelShape
from rmspec.plan.slurm import slurm_script
from rmspec.rundir import RunDir


def launch_fields(spec, run: RunDir, hw, shape: ModelShape, choice, precision) -> dict:
    """The plan's launch fields: accelerate config, command and environment, the Slurm script of a
    multi-node plan and its submit command, the files the run directory will hold."""
    rung = choice.rung
    config = accel.build_config(
        strategy=rung.strategy,
        mixed_precision=precision.mixed_precision,
        num_processes=hw.num_processes,
        num_machines=hw.nodes,
        use_cpu=not hw.is_gpu,
        layer_class=shape.layer_class,
        checkpointing=rung.checkpointing,
        grad_accum=choice.grad_accum,
        max_grad_norm=spec.training.max_grad_norm,
    )
    argv = launch_argv(run.accelerate_config, run.plan, direct=runs_direct(config))
    slurm = None
    files = [str(p) for p in run.files()]
    if hw.nodes > 1:
        slurm = slurm_script(
            name=spec.name,
            nodes=hw.nodes,
            gpus_per_node=hw.gpus_per_node,
            config_file=str(run.accelerate_config),
            plan_file=str(run.plan),
            run_dir=str(run.root),
            is_gpu=hw.is_gpu,
            env=launch_env(not hw.is_gpu),
            slurm=spec.hardware.slurm,
        )
        files.append(str(run.root / "launch.slurm"))
        multi_node = {
            "num_processes": hw.num_processes,
            "num_machines": hw.nodes,
            "main_process_ip": "$HEAD_NODE",
            "main_process_port": accel.DEFAULT_PORT,
        }
        argv = launch_argv(run.accelerate_config, run.plan, multi_node=multi_node)
    return {
        "accelerate_config": config,
        "launch_command": tuple(argv),
        "launch_env": launch_env(not hw.is_gpu),
        "slurm_script": slurm,
        "submit_command": ("sbatch", str(run.root / "launch.slurm")) if slurm else tuple(argv),
        "files": tuple(files),
    }
