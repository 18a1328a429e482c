"""Which path Bradley-Terry and listwise training take: shared-prefix rows (each prompt once) or
two (N) sequences per prompt.

The plan decides from the spec and the model's shape, without torch; the trainer decides again
from the loaded model's config (rmspec.train.packing.packing_path) with the same rules.
"""

from __future__ import annotations

from rmspec.errors import PlanError

SHARED_PREFIX, OFF = "shared_prefix", "off"
MASKED_ATTENTION = ("sdpa", "eager")


def plan_packing(
    setting: str, approach: str, architecture: str | None, attn: str, sft: bool = False
) -> tuple[str, str]:
    """(path, reason); ``shared_prefix`` where it cannot apply is a PlanError with the fix."""
    if setting == OFF:
        return OFF, "training.packing: off"
    why = None
    if sft:
        why = "approach.sft_weight: the LM term reads each chosen sequence on its own (two sequences per pair)"
    elif approach not in ("bradley_terry", "listwise"):
        why = f"approach {approach}: one sequence per example, no prompt shared between sequences"
    elif architecture == "encoder":
        why = "an encoder attends in both directions, so a prompt's states depend on the response after it"
    elif attn not in MASKED_ATTENTION:
        why = f"attention {attn!r} takes no custom 4D mask (shared-prefix rows need sdpa or eager)"
    if why is None:
        return SHARED_PREFIX, (
            "training.packing: shared_prefix"
            if setting == SHARED_PREFIX
            else "auto: a causal decoder in Bradley-Terry: each prompt computed once per pair, "
            "one row [prompt | chosen | rejected]"
            if approach == "bradley_terry"
            else "auto: a causal decoder in listwise training: each prompt computed once, one row "
            "[prompt | r_1 | ... | r_N]"
        )
    if setting == SHARED_PREFIX:
        raise PlanError(
            f"training.packing: shared_prefix cannot apply: {why}",
            hint="set training.packing: auto (or off) to train with one sequence per response",
        )
    return OFF, f"auto: {why}"
