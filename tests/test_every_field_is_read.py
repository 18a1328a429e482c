"""Every field of the spec models is read: changing it changes the plan, the run's TrainingArguments or the
prepared data (this module's table), the data or the source-reading calls (tests/helpers/fields_sources.py),
or a run's outputs, tracker and hub calls (tests/helpers/fields_recipes.py); or it is listed in PENDING
with the reason no accepted value can show (informational). A field in the models with no entry fails
the test: a new option must say what it changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import fields_recipes, fields_sources
from helpers.ci import need
from helpers.echoes import data_report_without_echoes, plan_without_echoes
from helpers.spec_fields import every_field

REPO = Path(__file__).resolve().parents[1]
BASE = (REPO / "specs" / "quickstart.yaml", ["hardware.cpu_memory_gb=16"])

SHAPE = (
    "model.shape={architecture: encoder, num_parameters: 22000000, hidden_size: 384, num_layers: 6, "
    "num_attention_heads: 12, intermediate_size: 1536, vocab_size: 30522}"
)
# a decoder's untied LM head holds vocab_size x hidden_size more: 22M parameters is too few (the planner refuses it)
LARGER = SHAPE.replace("22000000", "90000000")
DECODER = LARGER.replace("encoder", "decoder")

# "Class.field" -> (--set override on the quickstart spec, artifact that changes: plan | gpu_plan | args | data |
# rows); "a;b" sets a in both specs and b only in the changed one. plan: plan.json less its echoes of the spec;
# gpu_plan: the same made on a host with an H100 whose liger_kernel patches the model, each decision without its
# prose; args: the run's TrainingArguments; data: rmspec.data.prepare's report (less its echoes) and
# train/validation rows (tokenized, first 300 demo rows); rows: the rows kept and rejected (counted by reason)
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
    # where it acts: a GPU plan on a host whose liger_kernel patches the model (auto turns it on; off does not)
    "TrainingSpec.liger_kernel": ("hardware.device=h100-80gb;training.liger_kernel=off", "gpu_plan"),
    "HardwareSpec.gpus_per_node": ("hardware.gpus_per_node=2", "plan"),
    "HardwareSpec.headroom": ("hardware.headroom=0.3", "plan"),
    # hardware.slurm: the #SBATCH lines of launch.slurm (plan.slurm_script, what sbatch reads); the real cluster
    # takes partition and time in tests/test_slurm_train.py
    "HardwareSpec.slurm": ("hardware.nodes=2;hardware.slurm={partition: gpu}", "plan"),
    "SlurmSpec.partition": ("hardware.nodes=2;hardware.slurm={};hardware.slurm={partition: gpu}", "plan"),
    "SlurmSpec.account": ("hardware.nodes=2;hardware.slurm={};hardware.slurm={account: proj}", "plan"),
    "SlurmSpec.time": ("hardware.nodes=2;hardware.slurm={};hardware.slurm={time: '01:00:00'}", "plan"),
    "SlurmSpec.qos": ("hardware.nodes=2;hardware.slurm={};hardware.slurm={qos: high}", "plan"),
    "SlurmSpec.constraint": ("hardware.nodes=2;hardware.slurm={};hardware.slurm={constraint: ib}", "plan"),
    "SlurmSpec.gpus_per_node": (
        "hardware.device=a100-80gb;hardware.nodes=2;hardware.slurm={};hardware.slurm={gpus_per_node: 'a100:1'}",
        "plan",
    ),
    "SlurmSpec.extra": ("hardware.nodes=2;hardware.slurm={};hardware.slurm={extra: [--mem=0]}", "plan"),
    "HardwareSpec.cpu_memory_gb": ("hardware.cpu_memory_gb=64", "plan"),
    # on device cpu memory_gb is the host RAM unless cpu_memory_gb is set (both: refused); shown on a GPU device
    "HardwareSpec.memory_gb": ("hardware.device=a100-80gb;hardware.memory_gb=40", "plan"),
    "HardwareSpec.nodes": ("hardware.nodes=2", "plan"),
    "HardwareSpec.device": ("hardware.device=a100-80gb", "plan"),
    # communication time is modelled for multi-GPU plans only (rmspec.plan.communication)
    "HardwareSpec.interconnect": (
        "hardware.device=a100-80gb;hardware.gpus_per_node=2;hardware.interconnect=ethernet",
        "plan",
    ),
    # the link between nodes: a ring over both nodes' processes runs at the slower link
    "HardwareSpec.interconnect_between_nodes": (
        "hardware.device=a100-80gb;hardware.nodes=2;hardware.interconnect=nvlink;"
        "hardware.interconnect_between_nodes=infiniband",
        "plan",
    ),
    "EvalSpec.batch_size": ("eval.batch_size=64", "args"),
    # model shape (explicit, as for offline or private models), strategies, precision, data
    "ModelSpec.shape": (
        "model.shape={architecture: encoder, num_parameters: 90000000, hidden_size: 384, num_layers: 6, num_attention_heads: 12, intermediate_size: 1536, vocab_size: 30522}",
        "plan",
    ),  # noqa: E501
    "ModelShape.hidden_size": (SHAPE + ";" + "model.shape.hidden_size=512", "plan"),
    "ModelShape.num_layers": (SHAPE + ";" + "model.shape.num_layers=12", "plan"),
    "ModelShape.num_parameters": (SHAPE + ";" + "model.shape.num_parameters=90000000", "plan"),
    "ModelShape.num_attention_heads": (
        "model.attn_implementation=eager" + ";" + SHAPE + ";" + "model.shape.num_attention_heads=6",
        "plan",
    ),  # noqa: E501
    "ModelShape.num_key_value_heads": (SHAPE + ";" + "model.shape.num_key_value_heads=4", "plan"),
    "ModelShape.intermediate_size": (SHAPE + ";" + "model.shape.intermediate_size=3072", "plan"),
    "ModelShape.architecture": (LARGER + ";" + "model.shape.architecture=decoder", "plan"),
    "ModelShape.layer_class": (
        "hardware.device=a100-80gb"
        + ";"
        + "hardware.gpus_per_node=2"
        + ";"
        + "hardware.strategy=fsdp_full_shard"
        + ";"
        + SHAPE
        + ";"
        + "model.shape.layer_class=MyLayer",
        "plan",
    ),  # noqa: E501
    "ModelSpec.name_or_path": ("model.name_or_path=Qwen/Qwen2.5-0.5B-Instruct", "plan"),
    "LoraSpec.target_modules": ("model.lora={r: 8};model.lora.target_modules=[query, value]", "plan"),
    "LoraSpec.dropout": ("model.lora={r: 8};model.lora.dropout=0.1", "plan"),
    "HardwareSpec.bf16": ("hardware.bf16=true", "plan"),
    "HardwareSpec.strategy": (
        "hardware.device=a100-80gb;hardware.gpus_per_node=2;hardware.strategy=fsdp_full_shard",
        "plan",
    ),  # noqa: E501
    "TrainingSpec.packing": (DECODER + ";" + "training.packing=off", "plan"),
    "SplitSpec.validation_fraction": ("data.split.validation_fraction=0.2", "plan"),
    "TrainingSpec.optimizer": ("training.optimizer=adafactor", "args"),
    "TrainingSpec.optimizer_args": ("training.optimizer_args={betas: [0.8, 0.9]}", "args"),
    "TrainingSpec.min_learning_rate": (
        "training.lr_scheduler=cosine_with_min_lr;training.min_learning_rate=0.00001",
        "args",
    ),  # noqa: E501
    "TrainingSpec.early_stopping": ("training.eval_steps=10;training.early_stopping={patience: 2}", "args"),
    "EarlyStopping.metric": (
        "training.eval_steps=10;training.early_stopping={patience: 2};training.early_stopping.metric=eval/rm/loss",
        "args",
    ),  # noqa: E501
    "EarlyStopping.mode": (
        "training.eval_steps=10;training.early_stopping={patience: 2};training.early_stopping.mode=min",
        "args",
    ),  # noqa: E501
    "TrainingSpec.final_model": ("training.eval_steps=10;training.final_model=best", "args"),
    "TrainingSpec.best_metric": (
        "training.eval_steps=10;training.final_model=best;training.best_metric=eval/rm/loss",
        "args",
    ),  # noqa: E501
    "FilesSource.limit": ("data.source.limit=100", "data"),
    "FilesSource.paths": ("data.source.paths=[../rmspec/data/demo/benchmark_pairs.jsonl]", "data"),
    "DataSpec.source": ("data.source={kind: files, paths: [../rmspec/data/demo/benchmark_pairs.jsonl]}", "data"),
    "DataSpec.mapping": ("data.mapping={preset: pairs}", "data"),
    "MappingSpec.columns": ("data.mapping.columns={}", "data"),
    "ColumnMap.group": ("data.mapping.columns.group=id", "data"),
    # where it acts: a filter listed drops rows (the rows and the rejects differ)
    "DataSpec.filters": ("data.filters=[];data.filters=[{kind: sample, n: 100}]", "rows"),
    "MaxLengthFilter.kind": ("data.filters=[];data.filters=[{kind: max_length, max_tokens: 40, policy: drop}]", "data"),
    "MaxLengthFilter.max_tokens": (
        "data.filters=[{kind: max_length, max_tokens: 256}];data.filters=[{kind: max_length, max_tokens: 40}]",
        "data",
    ),  # noqa: E501
    "MaxLengthFilter.policy": (
        "data.filters=[{kind: max_length, max_tokens: 40, policy: truncate_prompt_left}];data.filters=[{kind: max_length, max_tokens: 40, policy: drop}]",
        "data",
    ),  # noqa: E501
    "DedupFilter.kind": ("data.filters=[];data.filters=[{kind: dedup}]", "data"),
    "RegexFilter.kind": ("data.filters=[];data.filters=[{kind: regex, field: chosen, pattern: the}]", "data"),
    "RegexFilter.pattern": (
        "data.filters=[{kind: regex, field: chosen, pattern: a}];data.filters=[{kind: regex, field: chosen, pattern: the}]",
        "data",
    ),  # noqa: E501
    "RegexFilter.field": (
        "data.filters=[{kind: regex, field: chosen, pattern: the}];data.filters=[{kind: regex, field: prompt, pattern: the}]",
        "data",
    ),  # noqa: E501
    "RegexFilter.action": (
        "data.filters=[{kind: regex, field: chosen, pattern: the}];data.filters=[{kind: regex, field: chosen, pattern: the, action: include}]",
        "data",
    ),  # noqa: E501
    "SampleFilter.kind": ("data.filters=[];data.filters=[{kind: sample, n: 100}]", "data"),
    "SampleFilter.n": ("data.filters=[{kind: sample, n: 100}];data.filters=[{kind: sample, n: 50}]", "data"),
    "SampleFilter.fraction": (
        "data.filters=[{kind: sample, fraction: 0.5}];data.filters=[{kind: sample, fraction: 0.25}]",
        "data",
    ),  # noqa: E501
    "SampleFilter.seed": (
        "data.filters=[{kind: sample, n: 100}];data.filters=[{kind: sample, n: 100, seed: 5}]",
        "data",
    ),  # noqa: E501
    "DataSpec.augment": ("data.augment=[{kind: cross_prompt_negatives}]", "data"),
    # another augmentation of the same rows swapped for it
    "CrossPromptNegatives.kind": (
        "data.augment=[{kind: truncated_negatives}];data.augment=[{kind: cross_prompt_negatives}]",
        "data",
    ),
    "CrossPromptNegatives.fraction": (
        "data.augment=[{kind: cross_prompt_negatives}];data.augment=[{kind: cross_prompt_negatives, fraction: 0.3}]",
        "data",
    ),  # noqa: E501
    "CrossPromptNegatives.seed": (
        "data.augment=[{kind: cross_prompt_negatives}];data.augment=[{kind: cross_prompt_negatives, seed: 3}]",
        "data",
    ),  # noqa: E501
    "TruncatedNegatives.kind": ("data.augment=[{kind: truncated_negatives}]", "data"),
    "TruncatedNegatives.fraction": (
        "data.augment=[{kind: truncated_negatives}];data.augment=[{kind: truncated_negatives, fraction: 0.3}]",
        "data",
    ),  # noqa: E501
    "TruncatedNegatives.keep": (
        "data.augment=[{kind: truncated_negatives}];data.augment=[{kind: truncated_negatives, keep: 0.2}]",
        "data",
    ),  # noqa: E501
    "TruncatedNegatives.seed": (
        "data.augment=[{kind: truncated_negatives}];data.augment=[{kind: truncated_negatives, seed: 3}]",
        "data",
    ),  # noqa: E501
    "SplitSpec.seed": ("data.split.seed=3", "data"),
    "SplitSpec.stratify_by": ("data.split.stratify_by=null", "data"),
    "SplitSpec.group_by_prompt": ("data.split.group_by_prompt=false", "data"),
}


PENDING_FILE = Path(__file__).parent / "helpers" / "fields_pending.txt"
PENDING_LINES = [line for line in PENDING_FILE.read_text().splitlines() if line.strip() and not line.startswith("#")]
PENDING = {line.split("#")[0].strip() for line in PENDING_LINES}


def test_every_pending_field_says_why():
    assert all("#" in line and line.split("#", 1)[1].strip() for line in PENDING_LINES), PENDING_LINES


# the other tables, each proven by its own test module (tests/test_every_field_is_read_{sources,recipes}.py)
TABLES = {"core": EFFECTS, "sources": fields_sources.EFFECTS, "recipes": fields_recipes.EFFECTS}


def test_every_field_has_an_entry():
    proven = {f for table in TABLES.values() for f in table}
    missing = [f for f in every_field() if f not in proven and f not in PENDING]
    assert not missing, "fields with no entry in EFFECTS (or PENDING):\n  " + "\n  ".join(missing)


def test_no_stale_entries():
    fields = set(every_field())
    for name, table in TABLES.items():
        assert not (set(table) - fields), (name, set(table) - fields)
        assert not (PENDING & set(table)), (name, PENDING & set(table))
    seen: set[str] = set()
    for name, table in TABLES.items():
        assert not (seen & set(table)), (name, "proven twice", seen & set(table))
        seen |= set(table)


def _plan(sets, gpus=()):
    from rmspec.plan import compile_plan
    from rmspec.plan.hardware import HostFacts
    from rmspec.spec import load_spec

    liger = ("bert", "llama") if gpus else None  # the model types an installed liger_kernel patches
    host = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=gpus, cpu_count=8, liger_model_types=liger)
    return compile_plan(load_spec(BASE[0], sets), host=host, sets=sets)


H100 = (("NVIDIA H100 80GB HBM3", 79.6),)


def _gpu_plan(sets) -> dict:
    """The plan on a GPU host, its liger_kernel entry reduced to the decision (the reason is prose)."""
    plan = plan_without_echoes(_plan(sets, gpus=H100).to_json())
    if plan.get("liger_kernel"):
        plan["liger_kernel"] = plan["liger_kernel"]["enabled"]
    return plan


def _args(sets, tmp_path):
    need("transformers")
    from rmspec.spec import load_spec
    from rmspec.train.arguments import build_training_arguments

    loaded = load_spec(BASE[0], sets)
    return build_training_arguments(loaded.spec, _plan(sets), tmp_path, has_validation=True).to_dict()


DATA_BASE = ["data.source.limit=300"]  # the data artifact reads the first 300 demo rows (fast)
_TOKENIZER: list = []


def _data(sets, tmp_path):
    """What the data stage makes: the report, and the train and validation rows (tokenized)."""
    need("transformers")
    from transformers import AutoTokenizer

    from rmspec.data.pipeline import prepare
    from rmspec.packaged import resolve_model_path
    from rmspec.spec import load_spec

    loaded = load_spec(BASE[0], sets)
    if not _TOKENIZER:
        _TOKENIZER.append(
            AutoTokenizer.from_pretrained(resolve_model_path(loaded.spec.model.name_or_path, loaded.base_dir))
        )
    cache = tmp_path / f"cache{len(list(tmp_path.glob('cache*')))}"  # a fresh cache: nothing is reused
    prepared = prepare(loaded, _TOKENIZER[0], cache_dir=cache)
    report = data_report_without_echoes(prepared.report.to_json())
    return {
        "report": report,
        "rejected": report["rejected"],
        "train": prepared.train.to_list(),
        "validation": prepared.validation.to_list() if prepared.validation is not None else None,
    }


@pytest.mark.parametrize("field", sorted(EFFECTS))
def test_field_changes_its_artifact(field, tmp_path):
    override, artifact = EFFECTS[field]
    *setup, last = override.split(";")  # "a;b": a in both, b only in the changed spec
    base = [*BASE[1], *setup]
    changed = [*base, last]
    if artifact == "plan":
        before, after = plan_without_echoes(_plan(base).to_json()), plan_without_echoes(_plan(changed).to_json())
    elif artifact == "gpu_plan":
        before, after = _gpu_plan(base), _gpu_plan(changed)
    elif artifact in ("data", "rows"):
        before, after = _data([*DATA_BASE, *base], tmp_path), _data([*DATA_BASE, *changed], tmp_path)
        if artifact == "rows":  # which rows are kept: their count, and the rejected count per reason
            before, after = ({"kept": v["report"]["rows_kept"], "rejected": v["rejected"]} for v in (before, after))
    else:
        before, after = _args(base, tmp_path), _args(changed, tmp_path)
    assert before != after, f"{override} changed nothing in the {artifact}"
