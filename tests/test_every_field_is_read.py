"""Every field of the spec models is read: changing it changes the plan or the run's TrainingArguments
(checked here, data-driven), or it is listed in PENDING: fields whose effect is not yet proven by
this table (each must be covered by an entry here over time). A field that appears in the models
without an entry in EFFECTS or PENDING fails the test: a new option must say what it changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.spec_fields import every_field

REPO = Path(__file__).resolve().parents[1]
BASE = (REPO / "specs" / "quickstart.yaml", ["hardware.cpu_memory_gb=16"])

# "Class.field" -> (--set override on the quickstart spec, artifact that changes: plan | args); "a;b" sets a
# in both specs and b only in the changed one
EFFECTS: dict[str, tuple[str, str]] = {
    "Spec.name": ("name=other", "plan"),
    "OutputSpec.dir": ("output.dir=elsewhere/{name}", "plan"),
    "ModelSpec.dtype": ("model.dtype=bfloat16", "plan"),
    "ModelSpec.attn_implementation": ("model.attn_implementation=eager", "plan"),
    "ModelSpec.lora": ("model.lora={r: 8}", "plan"),
    "LoraSpec.r": ("model.lora={r: 4}", "plan"),
    "TrainingSpec.global_batch_size": ("training.global_batch_size=32", "plan"),
    "TrainingSpec.micro_batch_size": ("training.micro_batch_size=2", "plan"),
    "TrainingSpec.max_length": ("training.max_length=64", "plan"),
    "TrainingSpec.gradient_checkpointing": ("training.gradient_checkpointing=on", "plan"),
    "TrainingSpec.max_steps": ("training.max_steps=3", "plan"),
    "TrainingSpec.epochs": ("training.epochs=2", "plan"),
    "TrainingSpec.max_grad_norm": ("training.max_grad_norm=0.5", "args"),
    "TrainingSpec.learning_rate": ("training.learning_rate=0.01", "args"),
    "TrainingSpec.lr_scheduler": ("training.lr_scheduler=cosine", "args"),
    "TrainingSpec.warmup_ratio": ("training.warmup_ratio=0.2", "args"),
    "TrainingSpec.weight_decay": ("training.weight_decay=0.1", "args"),
    "TrainingSpec.seed": ("training.seed=7", "args"),
    "TrainingSpec.logging_steps": ("training.logging_steps=3", "args"),
    "TrainingSpec.save_total_limit": ("training.save_total_limit=5", "args"),
    "TrainingSpec.save_steps": ("training.save_steps=7", "args"),
    "TrainingSpec.eval_steps": ("training.eval_steps=7", "args"),
    "TrainingSpec.liger_kernel": ("training.liger_kernel=off", "plan"),  # auto on CPU writes no key; off does
    "HardwareSpec.gpus_per_node": ("hardware.gpus_per_node=2", "plan"),
    "HardwareSpec.headroom": ("hardware.headroom=0.3", "plan"),
    "HardwareSpec.cpu_memory_gb": ("hardware.cpu_memory_gb=64", "plan"),
    # on device cpu, memory_gb is not read (host RAM is cpu_memory_gb): shown on a GPU device
    "HardwareSpec.memory_gb": ("hardware.device=a100-80gb;hardware.memory_gb=40", "plan"),
    "HardwareSpec.nodes": ("hardware.nodes=2", "plan"),
    "HardwareSpec.device": ("hardware.device=a100-80gb", "plan"),
    # communication time is modelled for multi-GPU plans only (rmspec.plan.communication)
    "HardwareSpec.interconnect": ("hardware.device=a100-80gb;hardware.gpus_per_node=2;hardware.interconnect=ethernet",
                                  "plan"),
    "EvalSpec.batch_size": ("eval.batch_size=64", "args"),
}


PENDING_FILE = Path(__file__).parent / "helpers" / "fields_pending.txt"
PENDING = {line.split("#")[0].strip() for line in PENDING_FILE.read_text().splitlines()} - {""}


def test_every_field_has_an_entry():
    missing = [f for f in every_field() if f not in EFFECTS and f not in PENDING]
    assert not missing, "fields with no entry in EFFECTS (or PENDING):\n  " + "\n  ".join(missing)


def test_no_stale_entries():
    fields = set(every_field())
    assert not (set(EFFECTS) - fields), set(EFFECTS) - fields
    assert not (PENDING & set(EFFECTS)), PENDING & set(EFFECTS)


def _plan(sets):
    from rmspec.plan import compile_plan
    from rmspec.plan.hardware import HostFacts
    from rmspec.spec import load_spec

    host = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)
    return compile_plan(load_spec(BASE[0], sets), host=host, sets=sets)


def _args(sets, tmp_path):
    pytest.importorskip("transformers")
    from rmspec.spec import load_spec
    from rmspec.train.arguments import build_training_arguments

    loaded = load_spec(BASE[0], sets)
    return build_training_arguments(loaded.spec, _plan(sets), tmp_path, has_validation=True).to_dict()


@pytest.mark.parametrize("field", sorted(EFFECTS))
def test_field_changes_its_artifact(field, tmp_path):
    override, artifact = EFFECTS[field]
    *setup, last = override.split(";")  # "a;b": a in both, b only in the changed spec
    base = [*BASE[1], *setup]
    changed = [*base, last]
    if artifact == "plan":
        before, after = _plan(base).to_json(), _plan(changed).to_json()
        for noise in ("spec_hash", "sets"):
            before.pop(noise), after.pop(noise)
    else:
        before, after = _args(base, tmp_path), _args(changed, tmp_path)
    assert before != after, f"{override} changed nothing in the {artifact}"
