"""Which path Bradley-Terry and listwise training take: shared-prefix rows (each prompt once) or
two (N) sequences per prompt; and pointwise, process and generative, whose rows are packed only where
hardware.context_parallel splits them (one response per group: the layout the split forward reads).

The plan decides from the spec and the model's shape, without torch; the trainer decides again
from the loaded model's config (rmspec.train.packing.packing_path) with the same rules.
"""

from __future__ import annotations

from typing import Any

from rmspec import approaches
from rmspec.errors import PlanError

SHARED_PREFIX, OFF = "shared_prefix", "off"
MASKED_ATTENTION = ("sdpa", "eager")


def plan_packing(
    setting: str, approach: Any, architecture: str | None, attn: str, split: bool = False
) -> tuple[str, str]:
    """(path, reason); ``shared_prefix`` where it cannot apply is a PlanError with the fix.
    `approach`: its declaration (rmspec.approaches) or name. ``split``: hardware.context_parallel above 1,
    which packs the rows of an approach that declares packs_when_split (pointwise, process, generative) though nothing is shared."""
    if isinstance(approach, str):
        approach = approaches.get(approach)
    if setting == OFF:
        return OFF, "training.packing: off"
    why = None
    packs = approach.shared_prefix or (split and approach.packs_when_split)
    # Bradley-Terry's SFT term (approach.sft_weight) packs too: it reads the chosen tokens' hidden states in the
    # packed row (rmspec.train.pair_extras.packed_pair_sft)
    if not packs:
        why = f"approach {approach.name}: one sequence per example, no prompt shared between sequences"
    elif architecture == "encoder":
        why = "an encoder attends in both directions, so a prompt's states depend on the response after it"
    elif attn not in MASKED_ATTENTION:
        why = f"attention {attn!r} takes no custom 4D mask (shared-prefix rows need sdpa or eager)"
    if why is None:
        if setting == SHARED_PREFIX:
            return SHARED_PREFIX, "training.packing: shared_prefix"
        if not approach.shared_prefix:  # packed only because the rows are split
            return SHARED_PREFIX, f"auto: a causal decoder split by hardware.context_parallel, {approach.packed_row}"
        return SHARED_PREFIX, f"auto: a causal decoder in {approach.packed_row}"
    if setting == SHARED_PREFIX:
        raise PlanError(
            f"training.packing: shared_prefix cannot apply: {why}",
            hint="set training.packing: auto (or off) to train with one sequence per response",
        )
    return OFF, f"auto: {why}"
