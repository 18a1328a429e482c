"""compile_plan: spec -> Plan.

Not a pure function of (spec, hardware profile, model shape): besides the spec it reads
- the model's config.json (local folder, Hugging Face cache or the packaged catalog) unless
  `shape` is given, and for a process reward model its tokenizer.json (separator check);
- the data: row counts and a sample of rows for the time estimate's mean length and the packed
  row bound (data files, or the SQLite database of a `sql` source);
- the host: /proc/cpuinfo, /proc/meminfo and nvidia-smi for `hardware.device: auto` unless `host`
  or `hardware` is given, the CPU core count (`host.cpu_count`, else os.cpu_count()) for a
  CPU plan's time estimate, and whether liger_kernel is installed (`host.liger_model_types`, else
  rmspec.plan.liger reads the installed package) for training.liger_kernel: auto.
Memory, strategy, precision and batch split depend only on (spec, hardware profile, model shape);
the data and the core count feed the time estimate (and the packed row bound) only. Tests pin
`host` and `shape` to make the whole plan reproducible (tests/golden/plans). Never imports torch,
transformers, datasets or accelerate.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from rmspec import approaches
from rmspec.gguf_source import cache_dir, describe, gguf_config, spec_gguf_source
from rmspec.packaged import resolve_model_path
from rmspec.plan.blocks import packed_attention
from rmspec.plan.communication import communication, context_parallel_communication, with_communication
from rmspec.plan.context_parallel import context_parallel_of, kv_traffic_bytes, rank_share, split_row, split_tokens
from rmspec.plan.context_parallel_auto import choose_degree
from rmspec.plan.estimate import data_rows, data_sequence_length, pairs_per_row, time_estimate
from rmspec.plan.fields import Sequences, batch_fields, memory_fields, raise_nothing_fits, strategy_fields
from rmspec.plan.grpo import grpo_notes, refuse_vllm_on_cpu
from rmspec.plan.hardware import HardwareProfile, HostFacts, hardware_profile
from rmspec.plan.heads import extra_head_parameters, head_notes
from rmspec.plan.invariants import checked
from rmspec.plan.launch_fields import launch_fields
from rmspec.plan.liger import installed_model_types, liger_decision
from rmspec.plan.memory import TrainingShape, lora_parameters, with_blocks
from rmspec.plan.model_shape import ModelShape, shape_from_config
from rmspec.plan.optimizer_state import planned_optimizer
from rmspec.plan.packing import SHARED_PREFIX, plan_packing
from rmspec.plan.plan import SCHEMA_VERSION, Plan, PlanModel
from rmspec.plan.recipes import needs_a_decoder, recipe_notes
from rmspec.plan.sequences import sequences_of
from rmspec.plan.shape_source import resolve_shape
from rmspec.plan.strategy import choose, choose_precision, host_memory
from rmspec.plan.vision import VisualPlan
from rmspec.plan.vision_steps import (
    frozen_vision,
    qwen_visual_plan,
    vision_lines,
    vision_section,
    vit_plan,
    with_visual_tokens,
)
from rmspec.rundir import RunDir

LORA_ROLES = {
    "q_proj": "q",
    "query": "q",
    "k_proj": "k",
    "key": "k",
    "v_proj": "v",
    "value": "v",
    "o_proj": "o",
    "dense": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "intermediate": "up",
    "down_proj": "down",
    "output": "down",
}


def _lora_targets(targets) -> tuple[str, ...] | None:
    if targets == "all-linear":
        return None
    roles = {LORA_ROLES[name] for name in targets if name in LORA_ROLES}
    return tuple(sorted(roles)) or None


def run_dir_of(spec) -> Path:
    return Path(spec.output.dir.replace("{name}", spec.name))


def compile_plan(
    loaded,
    *,
    host: HostFacts | None = None,
    hardware: HardwareProfile | None = None,
    shape: ModelShape | None = None,
    hub_cache: Path | None = None,
    sets: tuple[str, ...] | list[str] = (),
) -> Plan:
    """The plan for a loaded spec. `hardware`/`shape` replace detection and lookup (tests, what-ifs);
    `sets` are the --set overrides the spec was loaded with (kept so load_plan can re-check the hash).

    The steps, in order: the model (path, shape, weights), the hardware, precision and attention,
    the sequences one example becomes (lists, packing), the cheapest strategy that fits, the notes,
    the launch (accelerate config, command, Slurm script), the time estimate, the kernels and the
    separator check; then the plan, checked for impossible figures."""
    spec = loaded.spec
    model_path, shape, weights = _model(loaded, shape, hub_cache)
    hw = hardware or hardware_profile(spec.hardware, host)
    declared = approaches.of(spec)
    sft = needs_a_decoder(spec, declared, shape.architecture)  # an LM term beside the score head
    precision = choose_precision(spec.model.dtype, hw, spec.model.lora is not None)
    attn, attn_reason = _attention(spec.model.attn_implementation)
    cp_setting = spec.hardware.context_parallel
    seqs = sequences_of(loaded, declared, shape, attn, split=cp_setting != "auto" and int(cp_setting) > 1)
    run = RunDir(run_dir_of(spec))
    visual = qwen_visual_plan(spec, shape, model_path, run.data_report)  # a Qwen2-VL family VLM, else None
    seqs = with_visual_tokens(seqs, visual)
    base = _training_shape(spec, declared, seqs, sft, precision, attn, visual, frozen_vision(spec, shape))
    base = with_blocks(base, shape, hw.is_gpu)  # a wide packed row attends by blocks on CPU
    vit = vit_plan(spec, shape, model_path, run.data_report)  # LLaVA, Gemma 3, Idefics3, ...: else None
    if vit is not None:
        base = replace(base, vision_tiles=vit.tiles(base.seqs_per_example), vision_tower_trained=vit.tower_trained)
    cp, cp_chosen = choose_degree(  # hardware.context_parallel: a number as it is; auto: the smallest that fits
        spec.hardware.context_parallel,
        shape,
        base,
        hw,
        spec.training,
        attn=attn,
        # split rows are packed: pointwise's and process's only then (plan_packing's split), so auto may split them too
        packed=plan_packing(spec.training.packing, declared, shape.architecture, attn, split=True)[0] == SHARED_PREFIX,
        has_lora=spec.model.lora is not None,
        packed_list=seqs.n_list if seqs.packed and seqs.lists else None,
    )
    # auto split the rows of an approach packed only when split (pointwise, process, generative)
    if cp > 1 and not seqs.packed:
        seqs = sequences_of(loaded, declared, shape, attn, split=True)
        base = with_blocks(replace(base, packed=seqs.packed), shape, hw.is_gpu)  # the same one sequence, now packed
    fitted = split_row(cp, base, shape, attn, seqs.packed, hw.num_processes, hw.is_gpu)  # a rank's share where cp > 1
    held = rank_share(shape, fitted, cp, base.seq_len)  # a rank's gathered keys/values and mask slice, judged too
    choice = _fit(spec.training, shape, fitted, hw, spec.model.lora is not None, seqs, held, hw.num_processes // cp)
    cp_section = context_parallel_of(cp, shape, base, fitted, choice, hw, spec, cp_chosen)
    host_usable, warnings = host_memory(choice.memory, hw)
    warnings = [*warnings, *recipe_notes(spec, seqs.n_list, seqs.list_how), *head_notes(spec, shape.hidden_size)]
    notes, vision_warnings = vision_lines(spec, shape, model_path, run.data_report, vit, base, choice.memory)
    warnings += vision_warnings
    vision = vision_section(visual, base, choice.memory)
    refuse_vllm_on_cpu(spec, hw.is_gpu)
    warnings += grpo_notes(
        spec, shape, precision.compute, choice.micro_batch, hw.num_processes, choice.memory.total, hw.usable_gb
    )
    launch = launch_fields(spec, run, hw, shape, choice, precision)
    estimate, trained, trainable = _estimate(
        loaded, host, hw, shape, declared, base, seqs, choice, precision, visual, cp
    )
    cp_traffic = estimate.get("context_parallel_communication")
    if cp_section is not None and cp_section.get("chosen") and cp_traffic:
        # a rank's key/value bytes per step grow as N - 1 (its (N-1)/N of N / processes of the batch's rows)
        cp_section["chosen"] += (
            f"; the smallest N moves the least keys and values: {cp_traffic['bytes_per_step'] / 1e9:.1f} GB per rank, "
            f"~{cp_traffic['seconds_per_step']:.2f} s per step over {cp_traffic['interconnect']} (in the time line)"
        )
    liger = liger_decision(
        spec.training.liger_kernel,
        is_gpu=hw.is_gpu,
        model_type=shape.model_type,
        model_types=host.liger_model_types if host is not None else installed_model_types(),
    )
    plan = Plan(  # checked below: no negative or NaN figure reaches a reader (plan/invariants.py)
        schema_version=SCHEMA_VERSION,
        name=spec.name,
        approach=declared.name,
        spec_path=str(Path(loaded.file).resolve()),
        spec_hash=loaded.spec_hash,
        sets=tuple(sets),
        run_dir=str(run.root),
        model_path=model_path,
        model=PlanModel(
            name_or_path=spec.model.name_or_path,
            shape_source=shape.source,
            shape=shape.to_json(),
            num_parameters=shape.num_parameters,
            trained_parameters=trained,
            trainable_parameters=trainable,
            lora=spec.model.lora.model_dump() if spec.model.lora else None,
        ),
        hardware=hw,
        **strategy_fields(spec.training, hw, choice, precision),
        attn_implementation=attn,
        attn_reason=attn_reason,
        **batch_fields(
            spec.training,
            hw,
            choice,
            base,
            seqs,
            packed_attention(base.packed, base.seq_len, is_gpu=hw.is_gpu, sliding_window=shape.sliding_window),
        ),
        **memory_fields(hw, choice, host_usable),
        warnings=tuple(warnings) + ((f"model: {weights['note']}",) if weights else ()),
        estimate=estimate,
        **launch,
        step_separator=_step_separator(spec, model_path, hub_cache),
        optimizer=None if base.optimizer == "adamw" else base.optimizer,
        liger_kernel=liger,
        weights=weights,
        vision=vision,
        context_parallel=cp_section,
        notes=tuple(notes) or None,
    )
    return checked(plan)


def _model(loaded, shape: ModelShape | None, hub_cache: Path | None) -> tuple[str, ModelShape, dict | None]:
    """(where the weights are read from, the model's shape, what a GGUF model's weights are or None).
    A GGUF model (packaged:NAME or model.gguf_file) trains from its dequantised copy (rmspec.gguf_source)."""
    spec = loaded.spec
    gguf = spec_gguf_source(spec.model, loaded.base_dir)
    model_path = str(cache_dir(gguf)) if gguf else resolve_model_path(spec.model.name_or_path, loaded.base_dir)
    weights = describe(gguf) if gguf else None
    if shape is None and gguf is not None and spec.model.shape is None:
        shape = shape_from_config(gguf_config(gguf), f"GGUF header of {gguf.path}")
    if shape is None:
        shape = resolve_shape(spec.model.name_or_path, model_path, spec.model.shape, hub_cache)
    return model_path, shape, weights


def _attention(setting: str) -> tuple[str, str]:
    """(the attention implementation, why)."""
    if setting == "auto":
        return "sdpa", "auto: PyTorch SDPA (memory-efficient kernels, no seq x seq matrix kept)"
    return setting, "model.attn_implementation in the spec"


def _training_shape(
    spec,
    declared,
    seqs: Sequences,
    sft: bool,
    precision,
    attn: str,
    visual: VisualPlan | None = None,
    frozen_vision: int = 0,
) -> TrainingShape:
    """What the memory model sizes at micro batch 1: the strategy ladder then scales the micro batch."""
    lora, training = spec.model.lora, spec.training
    seqs_per_example = 1 if seqs.packed else seqs.n_list or declared.sequences_per_example or 1
    return TrainingShape(
        micro_batch=1,
        seqs_per_example=seqs_per_example,
        seq_len=seqs.row_bound if seqs.packed and seqs.row_bound is not None else training.max_length,
        packed=seqs.packed,
        head="score+lm" if sft else declared.head,
        precision=precision.compute,
        master_fp32=precision.master_fp32,
        checkpointing=False,
        attn=attn,
        lora_rank=lora.r if lora else None,
        lora_targets=_lora_targets(lora.target_modules) if lora else None,
        lora_dropout=lora.dropout if lora else 0.0,
        optimizer=planned_optimizer(training),
        vision_patches=visual.patches_per_example(seqs_per_example) if visual else 0,
        vision_image_patches=visual.largest_image_tokens * visual.unit if visual else 0,
        vision_tower_trained=visual.tower_trained if visual else True,
        vision_projector_trained=visual.projector_trained if visual else True,
        vision_frozen_parameters=frozen_vision,
    )


def _fit(
    training, shape: ModelShape, base: TrainingShape, hw, has_lora: bool, seqs: Sequences, held=None, replicas=None
):
    """The cheapest strategy and micro batch that fit (with what ``held`` adds: a context-parallel rank's
    share; the global batch dealt to ``replicas``, the groups, whose ranks share their rows), or PlanError
    saying what would. Where nothing fits a rank's share, the choice without it is returned:
    context_parallel_of then refuses it with the figures per rank."""
    fixed_micro = None if training.micro_batch_size == "auto" else training.micro_batch_size
    options = dict(
        global_batch=training.global_batch_size, checkpointing=training.gradient_checkpointing, replicas=replicas
    )
    choice = choose(shape, base, hw, **options, fixed_micro=fixed_micro, held=held)
    if choice is None and held is not None:
        choice = choose(shape, base, hw, **options, fixed_micro=fixed_micro)
    if choice is None:
        packed_list = seqs.n_list if seqs.packed and seqs.lists else None
        raise_nothing_fits(shape, base, hw, training, has_lora, fixed_micro, packed_list)
    return choice


def _estimate(
    loaded,
    host,
    hw,
    shape: ModelShape,
    declared,
    base: TrainingShape,
    seqs: Sequences,
    choice,
    precision,
    visual=None,
    cp: int = 1,
):
    """(the time estimate with its communication, trained parameters, trainable parameters). ``cp``: the
    context-parallel degree, whose groups' key/value traffic is added at the estimate's row length."""
    spec, training, lora, rung = loaded.spec, loaded.spec.training, loaded.spec.model.lora, choice.rung
    rows, rows_how = pairs_per_row(
        spec.data, spec.approach.row_kind, loaded.base_dir, *data_rows(spec.data, loaded.base_dir)
    )
    split = spec.data.split
    # Time only: a guessed mean length (memory above stays at max_length, an upper bound).
    seq_len, seq_len_how = data_sequence_length(spec.data, spec.approach.row_kind, loaded.base_dir, training.max_length)
    if seqs.packed and seqs.row_tokens is not None and seqs.packed_how is not None:
        seq_len, seq_len_how = seqs.row_tokens, seqs.packed_how
    elif visual is not None and not seq_len_how.startswith("max_length"):  # the text guess read images as text
        extra = round(visual.mean_tokens_per_row)
        seq_len, seq_len_how = min(seq_len + extra, training.max_length), f"{seq_len_how} + {extra} visual tokens"
    cpu_cores = None if hw.is_gpu else (host.cpu_count if host is not None else os.cpu_count())
    estimate = time_estimate(
        shape=shape,
        rows=rows,
        rows_how=rows_how,
        validation_fraction=None if split.validation_source is not None else split.validation_fraction,
        global_batch=training.global_batch_size,
        sequences_per_example=base.seqs_per_example,
        seq_len=seq_len,
        seq_len_how=seq_len_how,
        max_length=training.max_length,
        lora=lora is not None,
        checkpointing=rung.checkpointing,
        lm_head=declared.uses_lm_head(spec.approach),
        num_processes=hw.num_processes,
        nodes=hw.nodes,
        peak_tflops=hw.peak_tflops,
        is_gpu=hw.is_gpu,
        offload=rung.strategy.endswith("offload"),
        cpu_cores=cpu_cores,
        epochs=training.epochs,
        max_steps=training.max_steps,
    )
    trained = shape.trained_parameters(base.head) + extra_head_parameters(spec, shape.hidden_size)
    trainable = (
        (lora_parameters(shape, lora.r, base.lora_targets) + shape.hidden_size)
        if lora
        else trained - base.vision_frozen_parameters
    )
    traffic = communication(  # hardware.interconnect: gradient/parameter traffic
        strategy=rung.strategy,
        num_processes=hw.num_processes,
        is_gpu=hw.is_gpu,
        interconnect=hw.interconnect,
        num_parameters=shape.num_parameters,
        trainable_parameters=trainable,
        precision=precision.compute,
        master_fp32=precision.master_fp32,
        gradient_accumulation_steps=choice.grad_accum,
        nodes=hw.nodes,
        between_nodes=spec.hardware.interconnect_between_nodes,
    )
    row = estimate["tokens_per_sequence"]  # time's row length (a guessed mean, or the bound), as compute's
    cp_traffic = context_parallel_communication(  # hardware.context_parallel: the groups' keys and values
        moved_bytes=kv_traffic_bytes(
            shape,
            replace(base, micro_batch=choice.micro_batch, checkpointing=rung.checkpointing),
            degree=cp,
            row_tokens=row,
            grad_accum=choice.grad_accum,
        ),
        degree=cp,
        gpus_per_node=hw.gpus_per_node,
        nodes=hw.nodes,
        is_gpu=hw.is_gpu,
        interconnect=hw.interconnect,
        checkpointing=rung.checkpointing,
        row_tokens=split_tokens(row, cp)[0],
        between_nodes=spec.hardware.interconnect_between_nodes,
    )
    return with_communication(estimate, traffic, cp_traffic), trained, trainable


def _step_separator(spec, model_path: str, hub_cache: Path | None):
    """A section with a step separator (a PRM): how the separator carrying each step's label tokenizes."""
    if spec.approach.step_suffix is None:
        return None
    from rmspec.plan.separator import separator_check

    return separator_check(spec.approach.step_suffix, spec.model.name_or_path, model_path, hub_cache)
