"""The terraform-like view of a plan: what will run, on what, why, and what it will write.

Renders from the typed Plan alone (rmspec.plan.Plan, which a saved plan.json gives back whole),
so a saved plan renders the same as a fresh one.
"""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rmspec.plan import Plan
from rmspec.plan.liger import default_reason
from rmspec.render.console import make_console
from rmspec.render.context_parallel_view import render_context_parallel

COMPONENTS = [
    ("weights", "weights"),
    ("gradients", "gradients"),
    ("optimizer", "optimizer states"),
    ("activations", "activations"),
    ("temporary", "temporary (gathers, logits, casts)"),
    ("buffers", "buffers (DDP buckets)"),
    ("step_temporary", "optimizer step scratch"),
    ("overhead", "framework overhead"),
]


def stdout_console() -> Console:
    return make_console()  # the terminal's width, or a wide page in a pipe: paths never wrapped


def _count(n: int | float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(int(n))


def _step_time(seconds: float) -> str:
    """A per-step time: milliseconds under a second, else as _duration writes it."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else _duration(seconds)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _head(label: str) -> Text:
    return Text(f"{label:<15}", style="bold")


def _images(console: Console, vision: dict, max_length: int) -> None:
    rows, image = vision["visual_tokens_per_row"], vision["visual_tokens_per_image"]
    frozen = [
        n for n, k in (("vision tower", "vision_tower_trained"), ("projector", "projector_trained")) if not vision[k]
    ]
    console.print(
        _head("images")
        + Text(
            f"{rows['max']:,} visual tokens per row at most (mean {rows['mean']:g}), within max_length {max_length:,}"
        )
        + Text(f"  {vision['tokens_how']}", style="dim")
    )
    pixels = vision["pixels"]
    console.print(
        Text(" " * 15)
        + Text(
            f"{image['min']:,} to {image['max']:,} per image (min_pixels {pixels['min_pixels']:,}, max_pixels "
            f"{pixels['max_pixels']:,} from {pixels['from']}); the vision tower encodes "
            f"{vision['patches_per_example']:,} patches per example"
            + (
                f"; frozen: {', '.join(frozen)} ({vision.get('frozen_parameters', 0):,} parameters: weights only, "
                "no gradients or optimizer states)"
                if frozen
                else "; trained: vision tower and projector"
            ),
            style="dim",
        )
    )


def render_plan(plan: Plan, console: Console | None = None) -> None:
    console = console or stdout_console()
    p = plan
    model, shape, hw = p.model, p.model.shape, p.hardware
    console.print(
        Text(f"rmspec plan: {p.name}", style="bold underline"),
        Text(f"  ({p.approach}, spec {p.spec_path}, hash {p.spec_hash[:12]})", style="dim"),
    )
    if p.sets:
        console.print(Text("  with --set " + " --set ".join(p.sets), style="dim"))
    console.print()

    # ---- model
    console.print(_head("model") + Text(model.name_or_path) + Text(f"  -> {p.model_path}", style="dim"))
    lora = model.lora
    trained = (
        f"{_count(model.trainable_parameters)} trainable (LoRA r={lora['r']}) of {_count(model.trained_parameters)}"
        if lora
        else f"{_count(model.trained_parameters)} trained"
    )
    console.print(
        Text(" " * 15)
        + Text(
            f"{_count(model.num_parameters)} parameters, {trained}; {shape['architecture']} "
            f"{shape['num_layers']} x {shape['layer_class'] or 'block'}, hidden {shape['hidden_size']}, "
            f"heads {shape['num_attention_heads']}/{shape['num_key_value_heads']} KV, intermediate "
            f"{shape['intermediate_size']}, vocab {shape['vocab_size']}"
        )
    )
    console.print(Text(" " * 15) + Text(f"shape from {model.shape_source}", style="dim"))

    # ---- hardware, precision
    if hw.is_gpu:
        sizing = (
            f"{p.num_machines} node(s) x {p.processes_per_node} x {hw.label}, {p.device_capacity_gb:g} GB "
            f"each ({hw.headroom:.0%} headroom: {p.device_usable_gb:g} GB usable)"
        )
    else:
        sizing = (
            f"{p.num_machines} node(s) x {p.processes_per_node} CPU process(es), {hw.memory_gb:.1f} GB host "
            f"RAM: {p.device_capacity_gb:.1f} GB per process ({hw.headroom:.0%} headroom: "
            f"{p.device_usable_gb:.1f} GB usable)"
        )
    console.print(_head("hardware") + Text(sizing))
    console.print(Text(" " * 15) + Text(hw.source, style="dim"))
    console.print(_head("precision") + Text(p.precision, style="bold cyan") + Text(f"  {p.precision_reason}"))
    console.print(_head("attention") + Text(p.attn_implementation) + Text(f"  {p.attn_reason}", style="dim"))
    if p.step_separator:  # a process reward model: where each step's label sits
        sep = p.step_separator
        console.print(_head("step sep") + Text(repr(sep["separator"])) + Text(f"  {sep['how']}", style="dim"))
    if p.packing:
        console.print(_head("packing") + Text(p.packing) + Text(f"  {p.packing_reason}", style="dim"))
        if p.packed_attention:
            console.print(Text(" " * 15) + Text(f"attends {p.packed_attention}", style="dim"))
    if p.context_parallel:  # hardware.context_parallel: each row split over a group of ranks
        render_context_parallel(console, p.context_parallel, _head("context par."))
    if p.vision:  # a VLM: visual tokens per row and what the vision tower encodes (rmspec.plan.vision)
        _images(console, p.vision, p.max_length)
    packed = p.packing_tokens
    seq_words = (
        f"prompt-once rows of up to {packed['row_tokens_bound']} tokens"
        if packed
        else f"sequences of {p.max_length} tokens"
    )
    console.print()

    # ---- memory
    mem = p.memory_per_device_gb
    table = Table(
        title=f"memory per device (GB), {p.micro_batch_size} x {p.sequences_per_example} {seq_words}",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("component")
    table.add_column("GB", justify="right")
    for key, label in COMPONENTS:
        if key == "optimizer" and p.optimizer:
            from rmspec.plan.optimizer_state import DESCRIPTIONS

            label = f"optimizer states ({DESCRIPTIONS.get(p.optimizer, p.optimizer)})"
        if mem.get(key):
            table.add_row(label, f"{mem[key]:.2f}")
        if key == "activations" and p.vision and p.vision.get("activations_gb"):
            table.add_row(Text("  of which the vision tower", style="dim"), f"{p.vision['activations_gb']:.2f}")
    total, usable = mem["total"], p.device_usable_gb
    style = "green" if total <= usable else "red"
    table.add_row(Text("peak", style="bold"), Text(f"{total:.2f}", style=f"bold {style}"))
    table.add_row(Text("usable", style="dim"), Text(f"{usable:.2f}", style="dim"))
    console.print(table)
    console.print(Text(f"  {p.memory_rule}", style="dim"))
    width = 40
    filled = min(width, int(round(width * total / max(p.device_capacity_gb, 1e-9))))
    console.print(
        Text("  [")
        + Text("#" * filled, style=style)
        + Text("." * (width - filled))
        + Text(f"] {total / p.device_capacity_gb:.0%} of {p.device_capacity_gb:g} GB")
    )
    if p.cpu_memory_per_node_gb:
        host_usable = p.cpu_memory_usable_gb
        checked = (
            Text(f" of {host_usable:.1f} GB usable", style="green")
            if host_usable is not None
            else Text(" (unchecked: hardware.cpu_memory_gb not set)", style="yellow")
        )
        console.print(Text(f"  host memory for offload: {p.cpu_memory_per_node_gb:.1f} GB per node") + checked)
    for note in p.notes or ():
        console.print(Text("  note: ", style="dim") + Text(note))
    for warning in p.warnings:
        console.print(Text("  warning: ", style="bold yellow") + Text(warning))
    console.print()

    # ---- strategy
    console.print(_head("strategy") + Text(p.strategy, style="bold cyan") + Text(f"  {p.strategy_reason}", style="dim"))
    for refused in p.refused:
        console.print(
            Text(" " * 15)
            + Text("refused ", style="yellow")
            + Text(f"{refused['strategy']}: ")
            + Text(refused["reason"], style="dim")
        )
    ckpt = "on" if p.gradient_checkpointing else "off"
    by = f" (by {p.gradient_checkpointing_by})" if p.gradient_checkpointing_by else ""
    console.print(_head("checkpointing") + Text(ckpt + by) + Text(f"  {p.gradient_checkpointing_reason}", style="dim"))
    liger = p.liger_kernel or {"enabled": False, "reason": default_reason(p.uses_cpu)}
    console.print(
        _head("liger kernels") + Text("on" if liger["enabled"] else "off") + Text(f"  {liger['reason']}", style="dim")
    )

    # ---- batch
    console.print(
        _head("batch")
        + Text(
            f"{p.micro_batch_size} micro x {p.gradient_accumulation_steps} accumulation x {_data_parallel(p)} "
            f"= {p.global_batch_size} global"
        )
        + Text(f"  ({p.micro_batch_reason})", style="dim")
    )
    console.print(
        Text(" " * 15)
        + Text(
            f"{p.tokens_per_step:,} tokens per optimizer step at most ({p.global_batch_size} x "
            f"{p.sequences_per_example} {seq_words})"
        )
    )
    if packed:
        console.print(
            Text(" " * 15)
            + Text(
                f"expected per {packed.get('per', 'pair')}: {packed['row_tokens_expected']} tokens prompt-once vs "
                f"{packed['pair_tokens_unpacked_expected']} as "
                f"{'one sequence per response' if packed.get('per') == 'list' else 'two sequences'} ({packed['source']})",
                style="dim",
            )
        )

    # ---- time
    est = p.estimate
    if est.get("compute") and not hw.is_gpu:
        peak = (
            f"{est['peak_tflops_per_device']:g} TFLOPS per 2 cores (calibrated on the quickstart run), "
            f"scaled to {est['compute']} = {est['peak_tflops_total']:g} TFLOPS"
        )
    else:
        peak = f"{est['peak_tflops_per_device']:g} TFLOPS per device"
    assumption = f"assumed MFU {est['assumed_mfu']:.0%} of {peak}; {est['note']}"
    if est.get("steps_per_epoch"):
        line = (
            f"{est['rows']:,} rows ({est['rows_source']}), {est['train_rows']:,} for training: "
            f"{est['steps_per_epoch']:,} steps per epoch, ~{_duration(est['seconds_per_step'])} per step, "
            f"~{_duration(est['seconds_per_epoch'])} per epoch"
        )
    else:
        line = f"~{_duration(est['seconds_per_step'])} per step; epoch time unknown ({est['rows_source']})"
    if est.get("total_steps") and est.get("seconds_per_step") is not None:
        # the run's own length (max_steps when set, else the epochs), not an epoch's
        line += f"; the run: {est['total_steps']:,} steps, ~{_duration(est['total_steps'] * est['seconds_per_step'])}"
    console.print(_head("time") + Text(line))
    if est.get("tokens_per_step") is not None:
        console.print(
            Text(" " * 15)
            + Text(
                f"{est['tokens_per_step']:,} tokens per step for time ({p.global_batch_size} x "
                f"{p.sequences_per_example} {'rows' if packed else 'sequences'} x {est['tokens_per_sequence']} tokens)"
            )
        )
    comm = est.get("communication")
    if comm:  # hardware.interconnect (rmspec.plan.communication)
        shown = _step_time(comm["seconds_per_step"])
        console.print(
            Text(" " * 15)
            + Text(
                f"communication ~{shown} per step: {comm['bytes_per_step'] / 1e9:.2f} GB per device over "
                f"{comm['interconnect']} at {comm['bandwidth_gb_per_s']:g} GB/s ({comm['pattern']})"
            )
        )
    cp_comm = est.get("context_parallel_communication")
    if cp_comm:  # hardware.context_parallel (rmspec.plan.communication.context_parallel_communication)
        shown = _step_time(cp_comm["seconds_per_step"])
        console.print(
            Text(" " * 15)
            + Text(
                f"context parallel ~{shown} per step: {cp_comm['bytes_per_step'] / 1e9:.2f} GB per rank over "
                f"{cp_comm['interconnect']} at {cp_comm['bandwidth_gb_per_s']:g} GB/s, {cp_comm['link']}: "
                f"{cp_comm['pattern']}, rows of {cp_comm['row_tokens']:,} tokens"
            )
        )
    console.print(Text(" " * 15) + Text(assumption, style="dim"))
    console.print()

    # ---- launch
    env = " ".join(f"{k}={v}" for k, v in p.launch_env.items())
    if p.slurm_script:
        console.print(_head("launch") + Text(shlex.join(p.submit_command), style="bold"))
        console.print(Text(" " * 15) + Text("each node runs: ", style="dim") + Text(shlex.join(p.launch_command)))
    else:
        console.print(_head("launch") + Text((env + " " if env else "") + shlex.join(p.launch_command), style="bold"))
    console.print(_head("writes"))
    for path in p.files:
        console.print(Text("  + ", style="green") + Text(path))


def _data_parallel(p: Plan) -> str:
    """The batch line's last factor: the processes, or the context-parallel groups that each take one
    micro batch of rows together."""
    if p.context_parallel:
        return f"{p.context_parallel['groups']} context-parallel group(s) of {p.context_parallel['degree']} processes"
    return f"{p.num_processes} process(es)"
