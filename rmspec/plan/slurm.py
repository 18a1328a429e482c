"""SLURM batch script for a plan on several nodes: one task per node, each runs `accelerate launch`.

The rendezvous is c10d on the first node of the allocation, so no machine rank has to be
computed per node. What a real cluster taught (tests/test_slurm_train.py, REFERENCE 8):
- node names (`scontrol show hostnames`) need not resolve: the head's address is the node's
  NodeAddr as SLURM knows it, falling back to the name;
- a CPU plan must not ask for GPUs (`--gpus-per-node` cannot be satisfied on CPU nodes);
- the job needs the launch environment the local launcher sets (ACCELERATE_USE_CPU for CPU
  processes), exported in the script because srun passes the batch script's environment on;
- the first node hosts the c10d store (`is_host`) and each node passes its own rank, expanded in
  its own task: two nodes on one host otherwise both claim the port (accelerate refuses);
- a requeued job must append to its output file and find its checkpoints: `--requeue`,
  `--open-mode=append`; the trainer resumes from the last complete checkpoint by itself;
- most clusters want a partition, an account, a time limit or a QoS: `hardware.slurm` writes them
  (validated in rmspec/spec/hardware.py: one word each, sbatch's time formats, no line breaks), and
  what the spec leaves out sbatch still takes from SBATCH_PARTITION, SBATCH_TIMELIMIT, ... at submit.
"""

from __future__ import annotations

import shlex
from typing import Any

from rmspec.plan.argv import launch_argv, runtime_env

# hardware.slurm field -> the sbatch option it writes
CLUSTER_OPTIONS = {
    "partition": "--partition",
    "account": "--account",
    "time": "--time",
    "qos": "--qos",
    "constraint": "--constraint",
}


def slurm_script(
    *,
    name: str,
    nodes: int,
    gpus_per_node: int,
    config_file: str,
    plan_file: str,
    run_dir: str,
    is_gpu: bool = True,
    env: dict[str, str] | None = None,
    port: int = 29500,
    slurm: Any = None,
) -> str:
    """The batch script; `slurm` is the spec's hardware.slurm section (None: only what every job needs)."""
    argv = launch_argv(
        config_file,
        plan_file,
        multi_node={
            "num_processes": nodes * gpus_per_node,
            "num_machines": nodes,
            "machine_rank": "$SLURM_NODEID",
            "rdzv_conf": "is_host=$IS_HEAD",
            "main_process_ip": "$HEAD_NODE",
            "main_process_port": "$HEAD_PORT",
        },
    )
    # Quote everything; words with a shell expansion in double quotes, which each node's task evaluates.
    words = [f'"{w}"' if "$" in w else shlex.quote(w) for w in argv]
    command = " \\\n    ".join(_pairs(words))
    gpu_request = slurm.gpus_per_node if slurm is not None and slurm.gpus_per_node else gpus_per_node
    devices = f"#SBATCH --gpus-per-node={gpu_request}\n" if is_gpu else ""
    cluster = _cluster_lines(slurm)
    exports = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in (env or {}).items())
    defaults = "".join(
        f"export {key}=${{{key}:-{shlex.quote(value)}}}\n" for key, value in runtime_env(not is_gpu).items()
    )
    return f"""#!/bin/bash
# Written by `rmspec plan` for run {name}: submit with `sbatch {run_dir}/launch.slurm`
# from the folder `rmspec run` ran in (paths below are relative to it), or `rmspec run --submit`.
#SBATCH --job-name={name}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
{devices}#SBATCH --exclusive
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output={run_dir}/slurm-%j.out
{cluster}set -euo pipefail

{exports}{defaults}GPUS_PER_NODE={gpus_per_node}
HEAD_NAME=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)
# Node names need not be DNS names: SLURM knows each node's address (NodeAddr).
HEAD_NODE=$(scontrol show node "$HEAD_NAME" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)
HEAD_NODE=${{HEAD_NODE:-$HEAD_NAME}}
HEAD_PORT={port}
export GPUS_PER_NODE HEAD_NODE HEAD_PORT
echo "rmspec: job $SLURM_JOB_ID (restart ${{SLURM_RESTART_COUNT:-0}}) on $SLURM_JOB_NODELIST, rendezvous $HEAD_NODE:$HEAD_PORT"

# One task per node, run by srun on each node: its rank from SLURM ($SLURM_NODEID, set per task),
# and the c10d store hosted by the first node only (two nodes may share a host name).
node_task() {{
  IS_HEAD=$([ "$SLURM_NODEID" = 0 ] && echo 1 || echo 0)
  exec {command}
}}
export -f node_task
srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c node_task
"""  # noqa: E501 (the script's lines stay whole: they are what `rmspec plan` writes)


def _cluster_lines(slurm: Any) -> str:
    """#SBATCH lines for hardware.slurm's partition, account, time, qos, constraint and extra entries."""
    if slurm is None:
        return ""
    lines = [f"{option}={getattr(slurm, field)}" for field, option in CLUSTER_OPTIONS.items()]
    lines = [line for line, field in zip(lines, CLUSTER_OPTIONS) if getattr(slurm, field) is not None]
    lines += list(slurm.extra)
    for line in lines:  # the spec refused these already; a line break here would end the #SBATCH comment
        assert "\n" not in line and "\r" not in line, f"line break in an #SBATCH line: {line!r}"
    return "".join(f"#SBATCH {line}\n" for line in lines)


def _pairs(words: list[str]) -> list[str]:
    """Keep each --flag with its value on one line."""
    out: list[str] = [f"{words[0]} {words[1]}"]  # accelerate launch
    i = 2
    while i < len(words):
        if words[i].startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("-"):
            out.append(f"{words[i]} {words[i + 1]}")
            i += 2
        else:
            out.append(words[i])
            i += 1
    return out
