"""What a judge trained by GRPO (approach generative, method grpo) costs beyond a supervised step.

Memory: the policy is sized by the planner as any causal LM at training.max_length; GRPO adds the
reference model when approach.grpo.beta > 0 (TRL loads it only then: weights in the compute
precision, no gradients or optimizer state) and the KV cache of generation (every completion of
the device's generation batch holds keys and values for prompt + completion tokens, each layer).
Time: generation dominates; its sequential decode steps and the tokens it generates and reads per
optimizer step are given with their reasons. Light: no torch.
"""

from __future__ import annotations

from typing import Any

from rmspec.errors import PlanError

GIB = 2**30
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def grpo_notes(
    spec: Any, shape: Any, precision: str, micro_batch: int, processes: int, peak_bytes: float, usable_gb: float
) -> list[str]:
    """Plan lines for the GRPO parts (none for other approaches, so their plans are unchanged)."""
    grpo, training = spec.approach.reinforcement, spec.training
    if grpo is None:
        return []
    per_value = BYTES.get(precision, 4)
    steps_per_generation = grpo.steps_per_generation or max(1, training.global_batch_size // (micro_batch * processes))
    sequences = micro_batch * steps_per_generation  # completions one device generates at once
    tokens = training.max_length + grpo.max_completion_length  # the prompt (bounded by max_length) + completion
    kv = 2 * shape.num_layers * shape.kv_dim * per_value * sequences * tokens
    reference = shape.num_parameters * per_value if grpo.beta > 0 else 0.0
    total = (peak_bytes + reference + kv) / GIB
    notes = [
        f"grpo memory: reference model {reference / GIB:.2f} GB ("
        + (f"beta {grpo.beta:g} > 0: TRL loads a frozen copy in {precision}" if reference else "beta 0: none loaded")
        + f"), generation KV cache {kv / GIB:.2f} GB (2 x {shape.num_layers} layers x {shape.kv_dim} KV width x "
        f"{per_value} B x {sequences} completions x {tokens} tokens: prompt up to max_length + "
        f"max_completion_length); with the training peak: {total:.2f} of {usable_gb:.1f} GB usable"
        + ("" if total <= usable_gb else ": does NOT fit, lower training.micro_batch_size or max_completion_length"),
        f"grpo time: each generation round decodes {grpo.max_completion_length} tokens one after another for "
        f"{sequences * processes} completions ({sequences * processes // grpo.num_generations} prompts x "
        f"{grpo.num_generations}); per optimizer step {training.global_batch_size * grpo.max_completion_length:,} tokens "
        f"generated and up to {training.global_batch_size * training.max_length:,} prompt tokens read "
        f"(global batch {training.global_batch_size} completions); the policy"
        + (" and the reference model" if reference else "")
        + " then read prompt + completion once more for log-probabilities. Generation dominates the step on "
        "small batches; the time line above counts only the training forward/backward",
    ]
    return notes


def refuse_vllm_on_cpu(spec: Any, is_gpu: bool) -> None:
    """validate refuses use_vllm with hardware.device: cpu; a plan for device: auto that lands on CPUs
    is refused here, before a run starts."""
    grpo = spec.approach.reinforcement
    if grpo is not None and grpo.use_vllm and not is_gpu:
        raise PlanError(
            "approach.grpo.use_vllm: vLLM generates on a GPU, but this plan trains on CPUs",
            hint="write approach.grpo.use_vllm: false, or plan on a GPU host (hardware.device)",
        )
