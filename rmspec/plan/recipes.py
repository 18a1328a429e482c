"""What the recipe options (issue 21) change in the plan: responses per row for listwise training,
the SFT term's LM head, and what init_from will take. Light: no torch.

A listwise row is N sequences unpacked ([prompt | r_k] each), so the memory model sees N sequences
per example; N is read from the first rows of a local source (the largest list there), else 4
(UltraFeedback's four rated completions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.plan.estimate import sample_rows

DEFAULT_LIST_SIZE = 4


def list_size(spec: Any, base_dir: Path) -> tuple[int, str]:
    """(N, how): responses per listwise row."""
    mapping = spec.data.mapping
    column = (mapping.columns.responses or "responses") if mapping.preset != "ultrafeedback" else "completions"
    rows = sample_rows(spec.data.source, base_dir) if getattr(spec.data, "source", None) is not None else None
    sizes = [len(r[column]) for r in rows or [] if isinstance(r.get(column), list)]
    if sizes:
        return max(sizes), f"the largest of {len(sizes)} sampled rows' {column!r} lists"
    return DEFAULT_LIST_SIZE, f"not read from the data: {DEFAULT_LIST_SIZE} (UltraFeedback's rated completions)"


def recipe_notes(spec: Any, n_list: int | None, list_how: str | None) -> list[str]:
    """Plan warnings for options whose cost or effect the reader should see (none for other specs,
    so their plans are unchanged)."""
    approach = spec.approach
    notes = []
    if approach.kind == "listwise":
        notes.append(f"listwise: {n_list} sequences per prompt ({list_how}), each [prompt | response] on its own: "
                     "the prompt is computed N times (shared-prefix packing of rankings is not wired for training)")
    if getattr(approach, "sft_weight", 0.0):
        notes.append(f"sft_weight {approach.sft_weight}: the LM head is kept during training (sized here: its "
                     "weights, and its logits over the chosen sequence); the saved model is the score head only")
    if spec.model.init_from:
        folder = Path(spec.model.init_from)
        there = "" if (folder / "model" / "config.json").exists() else " (not there yet: run that stage first)"
        notes.append(f"model.init_from: weights from {folder / 'model'}{there}: the backbone, and the score head "
                     "where its shape agrees")
    return notes
