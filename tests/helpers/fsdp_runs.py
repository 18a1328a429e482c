"""FSDP plans on two CPU processes, for the FSDP and strategy-guard tests.

`plan_fsdp_on_cpu` is the TEST HOOK that plans FSDP on CPU: the user-facing planner refuses
`hardware.strategy: fsdp_*` on CPU processes (accelerate does not shard there), so the test compiles
the spec's CPU plan and replaces its strategy and accelerate config with what rmspec's own emitter
(rmspec.plan.accelerate_config.build_config) writes for that strategy. The run then goes through
`rmspec run plan.json` -> `accelerate launch -m rmspec.launch.entrypoint RUN/plan.json`.

Every run here trains full-batch gradient descent (SGD, constant rate, no clipping in effect, the
whole training split in each step; momentum so that there is optimizer state to resume) so that the sharded run and a single process see the same
global batch at every step, whatever the data order.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.fsdp_cpu_shim import child_env
from helpers.runs import write_pairs

ROWS, TRAIN_ROWS = 20, 16  # validation_fraction 0.2: 4 rows held out, 16 train = one global batch

SPEC = """version: 1
name: {name}
model:
  name_or_path: {model}
{lora}data:
  source: {{kind: files, paths: [pairs.jsonl]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: bradley_terry}}
training:
  optimizer: sgd
  optimizer_args: {{momentum: 0.9}}  # stateless SGD cannot resume under FSDP2 (no optimizer state to load)
  learning_rate: 0.5
  lr_scheduler: constant
  max_grad_norm: 1.0e+9
  global_batch_size: {batch}
  max_length: 64
  logging_steps: 1
  seed: 7
  packing: {packing}
  gradient_checkpointing: {checkpointing}
  max_steps: {steps}
  save_steps: {save_steps}
  save_total_limit: 5
hardware: {{device: cpu, gpus_per_node: {procs}, context_parallel: {context_parallel}}}
eval: {{validation: true, benchmarks: []}}
output: {{dir: {out}}}
"""

LORA = """  lora: {r: 4, alpha: 8, dropout: 0.0, target_modules: [q_proj, v_proj]}
"""


def write_spec(
    tmp: Path,
    model: Path,
    *,
    name: str,
    procs: int = 2,
    packing: str = "off",
    checkpointing: str = "off",
    lora: bool = False,
    steps: int = 2,
    save_steps: int = 100,
    context_parallel: int = 1,
) -> Path:
    if not (tmp / "pairs.jsonl").exists():
        write_pairs(tmp / "pairs.jsonl", ROWS)
    spec = tmp / f"{name}.yaml"
    spec.write_text(
        SPEC.format(
            name=name,
            model=model,
            lora=LORA if lora else "",
            batch=TRAIN_ROWS,
            packing=packing,
            checkpointing=checkpointing,
            steps=steps,
            save_steps=save_steps,
            procs=procs,
            context_parallel=context_parallel,
            out=tmp / "runs" / name,
        )
    )
    return spec


def plan_fsdp_on_cpu(
    spec: Path, strategy: str = "fsdp_full_shard", *, state_dict_type: str | None = None, replicas: int | None = None
) -> Path:
    """TEST HOOK: the spec's CPU plan with `strategy` (an FSDP one) and rmspec's accelerate config for
    it; written beside the spec as NAME.plan.json. ``replicas``: fsdp_hybrid_shard's replicate dimension, which
    a plan takes from hardware.nodes: here the processes of one machine stand for that many nodes."""
    from rmspec.plan import compile_plan, save_plan
    from rmspec.plan.accelerate_config import build_config
    from rmspec.spec import load_spec

    plan = compile_plan(load_spec(spec))
    config = build_config(
        strategy=strategy,
        mixed_precision=plan.mixed_precision,
        num_processes=plan.num_processes,
        num_machines=plan.num_machines,
        use_cpu=True,
        layer_class=plan.model.shape.get("layer_class"),
        checkpointing=plan.gradient_checkpointing,
        grad_accum=plan.gradient_accumulation_steps,
        max_grad_norm=1e9,
        replicas=replicas,
    )
    if state_dict_type is not None:
        config["fsdp_config"]["fsdp_state_dict_type"] = state_dict_type
    fsdp = dataclasses.replace(
        plan,
        strategy=strategy,
        strategy_reason="test hook (tests/helpers/fsdp_runs.py): FSDP planned on CPU processes",
        accelerate_config=config,
        gradient_checkpointing_by="accelerate_fsdp" if plan.gradient_checkpointing else None,
    )
    return save_plan(fsdp, spec.with_suffix(".plan.json"))


def run_env(record: Path | None = None, *, shim: bool = True) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}
    env.update(child_env(record, shim=shim) if (shim or record is not None) else {})
    return env


def rmspec_run(*args: str, cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rmspec", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def explain(done: subprocess.CompletedProcess, run: Path) -> str:
    log = run / "train.log"
    return done.stdout + done.stderr + (log.read_text()[-6000:] if log.exists() else "(no train.log)")


def status(run: Path) -> dict:
    return json.loads((run / "status.json").read_text())


def losses(run: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["train/rm/loss"] for r in rows if "train/rm/loss" in r}
