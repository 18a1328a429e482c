"""The `accelerate launch` argv for a plan (pure: no torch, no accelerate import).

The planner writes it into the plan (launch_command, launch.slurm); rmspec.launch runs it.

Shape (docs/architecture.md): accelerate launch --config_file RUN/accelerate_config.yaml
[--num_processes N ...] -m rmspec.launch.entrypoint RUN/plan.json
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ENTRYPOINT = "rmspec.launch.entrypoint"


def launch_argv(
    config_file: str | Path,
    plan_file: str | Path,
    *,
    module: str = ENTRYPOINT,
    module_args: list[str] | None = None,
    multi_node: dict | None = None,
) -> list[str]:
    """argv for one node. `multi_node` (num_processes, num_machines, main_process_ip, main_process_port,
    optionally machine_rank and rdzv_conf) adds the rendezvous flags each node passes under SLURM."""
    argv = ["accelerate", "launch", "--config_file", str(config_file)]
    if multi_node:
        argv += [
            "--num_processes",
            str(multi_node["num_processes"]),
            "--num_machines",
            str(multi_node["num_machines"]),
        ]
        if "machine_rank" in multi_node:  # accelerate checks the port only on rank 0
            argv += ["--machine_rank", str(multi_node["machine_rank"])]
        argv += ["--rdzv_backend", "c10d"]
        if "rdzv_conf" in multi_node:
            argv += ["--rdzv_conf", str(multi_node["rdzv_conf"])]
        argv += [
            "--main_process_ip",
            str(multi_node["main_process_ip"]),
            "--main_process_port",
            str(multi_node["main_process_port"]),
        ]
    argv += ["-m", module]
    argv += list(module_args) if module_args is not None else [str(plan_file)]
    return argv


def launch_env(use_cpu: bool) -> dict[str, str]:
    """Environment the launch needs besides the current one: CPU processes must be told to stay on CPU."""
    return {"ACCELERATE_USE_CPU": "true"} if use_cpu else {}


def runtime_env(use_cpu: bool) -> dict[str, str]:
    """Defaults every launch sets where the user has not (the local launcher and the SLURM script)."""
    env = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    if use_cpu:
        # OpenMP threads that spin while waiting halve the speed of a CPU shared with other work
        # (measured: 5.1 s vs 2.4 s per MiniLM step on 2 busy cores); passive waiting costs nothing when idle.
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def with_module(argv: list[str], module: str, module_args: list[str]) -> list[str]:
    """The same launch with another module after -m (tests launch a probe through the plan's argv)."""
    i = argv.index("-m")
    return argv[: i + 1] + [module] + list(module_args)


def resolve_program(argv: list[str]) -> list[str]:
    """argv with `accelerate` resolved: on PATH, else beside the running Python (a venv not activated)."""
    if argv and argv[0] == "accelerate" and shutil.which("accelerate") is None:
        beside = Path(sys.executable).parent / "accelerate"
        if beside.exists():
            return [str(beside)] + argv[1:]
    return list(argv)
