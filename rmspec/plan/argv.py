"""The launch argv for a plan (pure: no torch, no accelerate import).

The planner writes it into the plan (launch_command, launch.slurm); rmspec.launch runs it.

Shape (docs/architecture.md): accelerate launch --config_file RUN/accelerate_config.yaml
[--num_processes N ...] -m rmspec.launch.entrypoint RUN/plan.json; for one process on one machine
without FSDP or DeepSpeed, python -m rmspec.launch.entrypoint RUN/plan.json.

Why one process skips `accelerate launch`: its simple launcher only starts `python -m ...` with a few
environment variables, after importing torch and accelerate itself: about 5 s of CPU before each run
(docs/development.md). The trainer needs none of those variables: transformers' TrainingArguments sets
the mixed precision, ACCELERATE_USE_CPU is in the plan's launch_env, and the strategy guard checks
every planned fact in the running process either way.
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
    direct: bool = False,
) -> list[str]:
    """argv for one node. `multi_node` (num_processes, num_machines, main_process_ip, main_process_port,
    optionally machine_rank and rdzv_conf) adds the rendezvous flags each node passes under SLURM.
    `direct` (one process, distributed type NO): the module runs in `python` itself, no launcher."""
    args = list(module_args) if module_args is not None else [str(plan_file)]
    if direct:
        return ["python", "-m", module, *args]
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
    return [*argv, "-m", module, *args]


def runs_direct(accelerate_config: dict) -> bool:
    """One process on one machine with nothing for a launcher to set up (no FSDP, no DeepSpeed)."""
    return (
        accelerate_config.get("distributed_type") == "NO"
        and int(accelerate_config.get("num_processes", 1)) == 1
        and int(accelerate_config.get("num_machines", 1)) == 1
    )


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
    """argv with its program resolved: `python` is the interpreter running rmspec (as accelerate's own
    launcher starts its children), `accelerate` is on PATH, else beside that interpreter (a venv not
    activated)."""
    if argv and argv[0] == "python":
        return [sys.executable] + argv[1:]
    if argv and argv[0] == "accelerate" and shutil.which("accelerate") is None:
        beside = Path(sys.executable).parent / "accelerate"
        if beside.exists():
            return [str(beside)] + argv[1:]
    return list(argv)
