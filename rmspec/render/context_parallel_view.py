"""The plan's context-parallel lines (rmspec.plan.context_parallel's section), under `rmspec plan`'s packing line."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

INDENT = " " * 15


def render_context_parallel(console: Console, cp: dict[str, Any], head: Text) -> None:
    console.print(
        head
        + Text(f"{cp['degree']} ranks per row, {cp['groups']} group(s)")
        + Text(
            f"  a row of {cp['row_tokens']:,} tokens padded to {cp['padded_tokens']:,}: "
            f"{cp['tokens_per_rank']:,} per rank, two chunks each (one early, one late)",
            style="dim",
        )
    )
    if cp.get("chosen"):  # hardware.context_parallel: auto chose this N (rmspec.plan.context_parallel_auto)
        console.print(Text(INDENT) + Text(f"why {cp['degree']}: {cp['chosen']}"))
    console.print(
        Text(INDENT)
        + Text(
            f"per rank: activations {cp['activations_per_rank_gb']:.2f} GB (one process: "
            f"{cp['activations_one_process_gb']:.2f}), gathered keys and values {cp['gathered_kv_gb']:.2f}, "
            f"mask {cp['mask_per_rank_gb']:.2f} (one process: {cp['mask_one_process_gb']:.2f}); "
            f"total {cp['total_per_rank_gb']:.2f} GB"
        )
    )
    console.print(
        Text(INDENT)
        + Text(
            f"communication {cp['communication_gb_per_step']:.2f} GB per rank per step (keys and values "
            f"all-gathered forward{', again in the recompute' if cp.get('kv_passes_per_micro_step') == 3 else ''}, "
            "reduce-scattered backward; the time line adds it on GPUs)"
        )
    )
    console.print(
        Text(INDENT)
        + Text(
            f"the {cp['groups']} group(s) are the data-parallel replicas: the global batch is dealt to them, each "
            f"taking a micro batch of rows together: {cp['examples_per_step']} examples per optimizer step"
        )
    )
    console.print(Text(INDENT) + Text(cp["run"], style="yellow" if cp.get("run_refused") else ""))
