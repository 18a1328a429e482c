"""The typed plan: what `rmspec plan` decides and `rmspec run` executes, one field per plan.json key.

`Plan.to_json()` gives the keys in the order compile_plan always wrote them, so plan.json stays
byte-compatible (tests/golden/plans); `Plan.from_json()` refuses a document with another
schema_version or with a key missing or unknown, instead of defaulting it (a renamed key must not
silently train in fp32). Frozen at the top level; the nested sections that are JSON documents of
their own (memory, estimate, accelerate config, the model's shape) stay plain dicts.
Light: no torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.hardware import HardwareProfile

SCHEMA_VERSION = 1
# written only when set
OPTIONAL_KEYS = ("step_separator", "optimizer", "liger_kernel", "weights", "vision", "notes", "context_parallel")
REPLAN = "plan again with this version of rmspec: `rmspec plan SPEC --out plan.json`"


@dataclass(frozen=True)
class PlanModel:
    """The model section: what is trained, and how big it is."""

    name_or_path: str
    shape_source: str
    shape: dict[str, Any]  # rmspec.plan.model_shape.ModelShape.to_json()
    num_parameters: int
    trained_parameters: int
    trainable_parameters: int
    lora: dict[str, Any] | None  # the spec's model.lora, dumped


@dataclass(frozen=True)
class Plan:
    schema_version: int
    name: str
    approach: str
    spec_path: str  # absolute
    spec_hash: str
    sets: tuple[str, ...]  # the --set overrides compiled in (re-applied when the spec is checked)
    run_dir: str  # relative to where the run starts
    model_path: str  # resolved: a local folder or the hub id
    model: PlanModel
    hardware: HardwareProfile
    strategy: str
    strategy_reason: str
    refused: tuple[dict[str, str], ...]  # {strategy, reason} for each cheaper strategy that did not fit
    precision: str  # fp32, bf16, fp16
    mixed_precision: str  # accelerate's: no, bf16, fp16
    master_weights_fp32: bool
    precision_reason: str
    gradient_checkpointing: bool
    gradient_checkpointing_by: str | None  # accelerate_fsdp or model, never both
    gradient_checkpointing_reason: str
    attn_implementation: str
    attn_reason: str
    num_processes: int
    num_machines: int
    processes_per_node: int
    global_batch_size: int
    micro_batch_size: int
    gradient_accumulation_steps: int
    micro_batch_reason: str
    sequences_per_example: int
    max_length: int
    tokens_per_step: int
    packing: str | None
    packing_reason: str
    packed_attention: str | None  # how a packed row attends: by blocks, or through its whole mask (and why)
    packing_tokens: dict[str, Any] | None
    memory_per_device_gb: dict[str, float]
    memory_rule: str
    device_capacity_gb: float
    device_usable_gb: float
    cpu_memory_per_node_gb: float
    cpu_memory_usable_gb: float | None
    warnings: tuple[str, ...]
    estimate: dict[str, Any]
    accelerate_config: dict[str, Any]
    launch_command: tuple[str, ...]
    launch_env: dict[str, str]
    slurm_script: str | None
    submit_command: tuple[str, ...]
    files: tuple[str, ...]
    step_separator: dict[str, Any] | None = None  # process reward models only (absent from plan.json otherwise)
    # the optimizer's state layout (rmspec.plan.optimizer_state) when it is not AdamW; absent otherwise, so
    # plans of specs that never named an optimizer stay byte-identical
    optimizer: str | None = None
    # {enabled, reason} (rmspec.plan.liger); absent when auto changes nothing (CPU, or liger_kernel not installed)
    liger_kernel: dict[str, Any] | None = None
    # where the weights come from when they are not a plain checkpoint: a GGUF file dequantised to float
    # (rmspec.gguf_source.describe: format, file, quantisation, bits, note); absent for plain checkpoints
    weights: dict[str, Any] | None = None
    # a VLM's images (rmspec.plan.vision.VisualPlan.to_json): visual tokens per image and per row and where
    # they came from, the patches the vision tower encodes, which vision parts train, their activations
    vision: dict[str, Any] | None = None
    # hardware.context_parallel above 1 (rmspec.plan.context_parallel): each row split over a group of ranks, its
    # figures per rank; absent otherwise
    context_parallel: dict[str, Any] | None = None
    # what the plan tells without warning (a VLM's vision parameters and visual tokens per image); absent when none
    notes: tuple[str, ...] | None = None

    # ------------------------------------------------------------ derived
    @property
    def uses_cpu(self) -> bool:
        """The processes train on CPU (accelerate's use_cpu)."""
        return bool(self.accelerate_config.get("use_cpu"))

    @property
    def multi_node(self) -> bool:
        """Several nodes, launched by SLURM from launch.slurm rather than here."""
        return self.num_machines > 1 and bool(self.slurm_script)

    # ------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in OPTIONAL_KEYS and value is None:
                continue
            if isinstance(value, (PlanModel, HardwareProfile)):
                value = dataclasses.asdict(value)
            elif isinstance(value, tuple):
                value = list(value)
            data[f.name] = value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "plan") -> Plan:
        if not isinstance(data, Mapping):
            raise PlanError(f"{where} is not an rmspec plan (not a JSON object)", hint=REPLAN)
        if data.get("schema_version") != SCHEMA_VERSION:
            raise PlanError(
                f"{where}: plan schema_version {data.get('schema_version')!r}, this rmspec reads {SCHEMA_VERSION}",
                hint=REPLAN,
            )
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in data and n not in OPTIONAL_KEYS]
        unknown = [k for k in data if k not in names]
        if missing or unknown:
            raise PlanError(
                f"{where} is not a plan this rmspec can run"
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + (f"; unknown: {', '.join(unknown)}" if unknown else ""),
                hint=REPLAN,
            )
        values = dict(data)
        try:
            values["model"] = PlanModel(**data["model"])
            values["hardware"] = HardwareProfile(**data["hardware"])
        except TypeError as exc:
            raise PlanError(f"{where}: a malformed section ({exc})", hint=REPLAN) from None
        for name in ("sets", "refused", "warnings", "launch_command", "submit_command", "files"):
            values[name] = tuple(data[name])
        if data.get("notes") is not None:
            values["notes"] = tuple(data["notes"])
        return cls(**values)


def as_plan(plan: Plan | Mapping[str, Any]) -> Plan:
    """A Plan from a Plan or its JSON (callers that were handed plan.json's document)."""
    return plan if isinstance(plan, Plan) else Plan.from_json(plan)
