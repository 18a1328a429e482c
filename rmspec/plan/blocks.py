"""How a packed row attends, as the plan sizes it: by blocks, or through its whole mask.

`rmspec run` attends a packed row wider than ``ATTENTION_BLOCK`` columns by blocks on CPU
(rmspec.inference.block_attention, which reads the block size from here): each query block attends only the
key ranges rmspec's prompt-once mask allows, through torch's CPU flash kernel, and holds a float mask only
for a key block the mask cuts through. Elsewhere (a GPU, a sliding-window model, a narrow row) the row
attends through one whole-row float mask, shared by the layers (rmspec.plan.memory.packed_mask_bytes).
"""

from __future__ import annotations

# At most PARTIAL_BLOCKS key blocks of a query block are cut through by the mask: a prompt-response boundary, its
# own response's start, the diagonal.
ATTENTION_BLOCK = 512
PARTIAL_BLOCKS = 3


def why_masked(
    width: int, *, is_gpu: bool, sliding_window: bool, dropout: float = 0.0, block: int = ATTENTION_BLOCK
) -> str | None:
    """Why a packed row of ``width`` columns attends through its whole mask, or None where it attends by blocks:
    the one rule the plan and `rmspec run` (rmspec.inference.block_attention.usable) read."""
    if is_gpu:
        return "on a GPU"
    if width <= block:
        return f"a row of at most {block} columns, one block"
    if sliding_window:
        return "a sliding-window model"
    if dropout:
        return "attention dropout"
    return None


def attends_by_blocks(packed: bool, width: int, *, is_gpu: bool, sliding_window: bool) -> bool:
    """As `rmspec run` decides it for a row of ``width`` columns (the whole row, before a context-parallel split)."""
    return packed and why_masked(width, is_gpu=is_gpu, sliding_window=sliding_window) is None


def packed_attention(packed: bool, width: int, *, is_gpu: bool, sliding_window: bool) -> str | None:
    """How a packed row of ``width`` columns attends, in the plan's words (None for rows that are not packed)."""
    if not packed:
        return None
    why = why_masked(width, is_gpu=is_gpu, sliding_window=sliding_window)
    if why is None:
        return (
            f"by blocks of {ATTENTION_BLOCK} columns: each attends only the key ranges the prompt-once mask allows, "
            "no whole-row mask is kept"
        )
    return f"through one whole-row float mask shared by the layers ({why})"


def block_mask_bytes(rows: int, queries: int, width: int, dtype_bytes: int) -> float:
    """The most a block plan's partial masks hold: PARTIAL_BLOCKS key blocks per query, in the compute dtype."""
    return float(rows * queries * min(width, PARTIAL_BLOCKS * ATTENTION_BLOCK) * dtype_bytes)
