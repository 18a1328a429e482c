"""`rmspec plan` through the CLI: view, --json, --out, refusal of a changed spec, exit 2, no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rmspec.errors import PlanError

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"
REQUIRED = (
    "strategy",
    "precision",
    "num_processes",
    "num_machines",
    "micro_batch_size",
    "gradient_accumulation_steps",
    "global_batch_size",
    "memory_per_device_gb",
    "device_capacity_gb",
    "accelerate_config",
    "launch_command",
    "spec_hash",
    "spec_path",
    "run_dir",
    "model_path",
    "gradient_checkpointing",
    "attn_implementation",
)


def test_plan_never_imports_the_heavy_libraries():
    code = (
        "import sys\n"
        "from rmspec.cli.main import cli\n"
        f"cli.main(['plan', {str(SPECS / 'hh_bt.yaml')!r}, '--json'], standalone_mode=False)\n"
        f"cli.main(['plan', {str(SPECS / 'quickstart.yaml')!r}], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout


def test_json_carries_the_contract_keys(cli):
    result = cli("plan", SPECS / "hh_bt.yaml", "--json")
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    for key in REQUIRED:
        assert key in plan, key
    assert {"total", "weights", "gradients", "optimizer", "activations"} <= set(plan["memory_per_device_gb"])
    assert plan["strategy"] in (
        "single",
        "ddp",
        "fsdp_shard_grad_op",
        "fsdp_full_shard",
        "fsdp_full_shard_offload",
        "deepspeed_zero2",
        "deepspeed_zero3",
        "deepspeed_zero3_offload",
    )


def test_view_shows_the_decisions(cli):
    result = cli("plan", SPECS / "ultrafeedback_bt.yaml")
    assert result.code == 0, result.err
    out = result.out
    for needle in (
        "built-in catalog (llama-3.1-8b)",
        "refused ddp",
        "micro x",
        "= 256 global",
        "tokens per optimizer step",
        "sbatch runs/ultrafeedback-bt/launch.slurm",
        "+ runs/ultrafeedback-bt/plan.json",
        "peak",
    ):
        assert needle in out, needle


def test_out_saves_and_load_refuses_a_changed_spec(cli, tmp_path):
    from rmspec.plan import load_plan

    spec = tmp_path / "spec.yaml"
    spec.write_text((SPECS / "hh_bt.yaml").read_text())
    out = tmp_path / "plan.json"
    result = cli("plan", spec, "--set", "training.learning_rate=2e-5", "--out", out)
    assert result.code == 0, result.err
    saved = load_plan(out)  # unchanged spec, same --set: accepted
    assert saved["sets"] == ["training.learning_rate=2e-5"]
    spec.write_text(spec.read_text().replace("epochs: 1", "epochs: 2"))
    try:
        load_plan(out)
    except PlanError as err:
        assert "changed since this plan was made" in err.message and "rmspec plan" in err.hint
    else:
        raise AssertionError("a plan whose spec changed was accepted")


def test_infeasible_plan_exits_2_with_alternatives(cli):
    result = cli(
        "plan",
        SPECS / "ultrafeedback_bt.yaml",
        "--set",
        "hardware.device=rtx4090-24gb",
        "--set",
        "hardware.gpus_per_node=1",
        "--set",
        "hardware.nodes=1",
        "--set",
        "hardware.cpu_memory_gb=64",
        "--set",
        "model.name_or_path=meta-llama/Llama-3.1-70B-Instruct",
    )
    assert result.code == 2
    assert "nothing fits" in result.err and "what would fit" in result.err
    assert "more GPUs" in result.err and "Traceback" not in result.err


def test_unknown_model_exits_2_saying_how_to_give_the_shape(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    result = cli("plan", SPECS / "hh_bt.yaml", "--set", "model.name_or_path=acme/unknown-7b")
    assert result.code == 2
    assert "model.shape" in result.err
