"""`training:` optimisation settings. Derived numbers (micro batch, accumulation) live in the plan."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from rmspec.spec.base import Section


class EarlyStopping(Section):
    metric: str = Field("eval/rm/accuracy", description="Metric watched at each evaluation.")
    mode: Literal["max", "min"] = Field("max", description="Whether higher or lower is better.")
    patience: PositiveInt = Field(3, description="Evaluations without improvement before stopping.")


class TrainingSpec(Section):
    epochs: float | None = Field(1.0, gt=0, description="Passes over the training data (fractions allowed).")
    max_steps: PositiveInt | None = Field(None, description="Optimizer steps; overrides epochs when set.")
    learning_rate: float = Field(1e-5, gt=0, lt=1, description="Peak learning rate.")
    lr_scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup"] = Field(
        "linear", description="Learning-rate schedule after warmup."
    )
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Share of steps spent warming up.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    global_batch_size: PositiveInt = Field(
        32, description="Pairs (or rows) per optimizer step across all devices; the plan splits it into micro batches."
    )
    micro_batch_size: PositiveInt | Literal["auto"] = Field(
        "auto", description="Pairs per device per forward pass; auto lets the plan pick the largest that fits."
    )
    max_length: PositiveInt = Field(512, description="Token limit per sequence (prompt + response).")
    gradient_checkpointing: Literal["auto", "on", "off"] = Field(
        "auto", description="Recompute activations to save memory; auto switches it on only when the plan needs it."
    )
    group_by_length: bool = Field(True, description="Batch rows of similar length to cut padding.")
    packing: Literal["auto", "shared_prefix", "off"] = Field(
        "auto",
        description=(
            "Compute each prompt once per pair: one row [prompt | chosen | rejected] where each response sees "
            "the prompt and itself (a 4D attention mask, positions restarting after the prompt). Exact for "
            "causal decoders. auto: on for Bradley-Terry decoders whose attention takes a custom mask (sdpa, "
            "eager), off elsewhere (encoders, flash-attention, pointwise, generative), the plan says why; "
            "shared_prefix: require it (an error where it cannot apply); off: two sequences per pair."
        ),
    )
    seed: int = Field(42, description="Seed for model init, data order and dropout.")
    logging_steps: PositiveInt = Field(10, description="Log metrics every N optimizer steps.")
    eval_steps: PositiveInt | None = Field(None, description="Evaluate on the validation split every N steps (default: at the end).")
    save_steps: PositiveInt | None = Field(None, description="Checkpoint every N steps (default: at the end of each epoch).")
    save_total_limit: PositiveInt = Field(2, description="Checkpoints kept on disk.")
    early_stopping: EarlyStopping | None = Field(None, description="Stop when the watched metric stops improving.")

    @model_validator(mode="after")
    def _length(self) -> "TrainingSpec":
        if self.max_steps is not None:
            # max_steps wins; epochs is kept for the plan's time estimate only.
            return self
        if self.epochs is None:
            raise ValueError("give epochs or max_steps")
        return self
