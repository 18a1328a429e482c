"""What approach.length_debias and approach.ensemble add to the plan: a wider score head while
training (2 outputs for ODIN, N for an ensemble; the saved model has 1). Light: no torch.

The extra head is (K - 1) x (hidden + 1) parameters, on the shared backbone's features: kilobytes
next to the backbone, so the memory estimate (its weights, gradients and AdamW moments) is left as
it is and the plan says what the extra head costs. The forward and backward pass are the plain
Bradley-Terry ones: every head reads the same features.
"""

from __future__ import annotations

from typing import Any

BYTES_TRAINED = 16  # fp32 weight + gradient + two AdamW moments per parameter


def extra_head_parameters(spec: Any, hidden_size: int) -> int:
    """Parameters of the training head beyond the saved one-output head."""
    return (spec.approach.trained_heads - 1) * (hidden_size + 1)


def head_notes(spec: Any, hidden_size: int) -> list[str]:
    """Plan warnings that size the extra heads (none for other specs, so their plans are unchanged)."""
    approach = spec.approach
    extra = extra_head_parameters(spec, hidden_size)
    if not extra:
        return []
    cost = f"+{extra:,} parameters ({extra * BYTES_TRAINED / 1024:.1f} KiB with gradients and AdamW moments)"
    if approach.length_debias is not None:
        return [
            f"length_debias (ODIN): a quality head and a length head while training, {cost}; the saved model "
            "is the quality head alone (a plain one-output classifier)"
        ]
    members = approach.ensemble.members
    sample = "each on its bootstrap resample" if approach.ensemble.bootstrap else "each on every pair"
    return [
        f"ensemble: {members} heads on the shared backbone ({sample}), {cost}; the forward pass is shared. "
        f"Saved: the mean head (what transformers loads) + ensemble_heads.safetensors (the members, for reward_std)"
    ]
