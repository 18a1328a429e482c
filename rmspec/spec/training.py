"""`training:` optimisation settings. Derived numbers (micro batch, accumulation) live in the plan."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from rmspec.spec.base import Section

# transformers' `optim` names rmspec accepts, with two short aliases: adamw is TrainingArguments' own
# default (fused AdamW, what rmspec always ran), lion is bitsandbytes' 32-bit Lion (transformers has no other).
Optimizer = Literal[
    "adamw",
    "adamw_torch",
    "adamw_torch_fused",
    "adamw_8bit",
    "adafactor",
    "lion",
    "lion_32bit",
    "lion_8bit",
    "sgd",
    "schedule_free_adamw",
]
OPTIMIZER_ALIASES = {"adamw": "adamw_torch_fused", "lion": "lion_32bit"}
# Schedules that end at training.min_learning_rate instead of 0 (EasyDeL's learning_rate_end).
MIN_LR_SCHEDULES = ("cosine_with_min_lr", "warmup_stable_decay")


def lower_is_better(metric: str) -> bool:
    return metric.rsplit("/", 1)[-1] in ("loss", "mse", "mae")


class EarlyStopping(Section):
    metric: str = Field("eval/rm/accuracy", description="Metric watched at each evaluation.")
    mode: Literal["max", "min"] = Field("max", description="Whether higher or lower is better.")
    patience: PositiveInt = Field(3, description="Evaluations without improvement before stopping.")


class TrainingSpec(Section):
    epochs: float | None = Field(1.0, gt=0, description="Passes over the training data (fractions allowed).")
    max_steps: PositiveInt | None = Field(None, description="Optimizer steps; overrides epochs when set.")
    learning_rate: float = Field(1e-5, gt=0, lt=1, description="Peak learning rate.")
    lr_scheduler: Literal[
        "linear", "cosine", "constant", "constant_with_warmup", "cosine_with_min_lr", "warmup_stable_decay"
    ] = Field(
        "linear",
        description=(
            "Learning-rate schedule after warmup. cosine_with_min_lr and warmup_stable_decay end at "
            "min_learning_rate; warmup_stable_decay holds the peak, then decays linearly over the last decay_ratio."
        ),
    )
    min_learning_rate: float = Field(
        0.0, ge=0, description="Learning rate at the last step, for cosine_with_min_lr and warmup_stable_decay."
    )
    decay_ratio: float = Field(
        0.1, gt=0, le=1, description="warmup_stable_decay: share of the steps spent decaying to min_learning_rate."
    )
    optimizer: Optimizer = Field(
        "adamw",
        description=(
            "transformers' optim name: adamw (fused AdamW, the default), adamw_torch, adamw_8bit (bitsandbytes, "
            "CUDA), adafactor (factored second moments, no first moment), lion / lion_32bit / lion_8bit "
            "(bitsandbytes, CUDA), sgd, schedule_free_adamw (the schedulefree package)."
        ),
    )
    optimizer_args: dict[str, float | bool | list[float]] = Field(
        default_factory=dict,
        description=(
            "Optimizer settings: betas [b1, b2] and eps go to TrainingArguments' adam_beta1/adam_beta2/"
            "adam_epsilon (Adam, Lion); others (momentum, nesterov, weight_lr_power, ...) to its optim_args."
        ),
    )
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Share of steps spent warming up.")
    weight_decay: float = Field(0.0, ge=0, description="Decoupled weight decay (every optimizer).")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    global_batch_size: PositiveInt = Field(
        32, description="Pairs (or rows) per optimizer step across all devices; the plan splits it into micro batches."
    )
    micro_batch_size: PositiveInt | Literal["auto"] = Field(
        "auto",
        description="Pairs per device per forward pass (with hardware.context_parallel: N, per group of N devices, "
        "which split each row; the global batch is dealt to the groups); auto lets the plan pick the largest that fits.",
    )
    max_length: PositiveInt = Field(512, description="Token limit per sequence (prompt + response).")
    gradient_checkpointing: Literal["auto", "on", "off"] = Field(
        "auto", description="Recompute activations to save memory; auto switches it on only when the plan needs it."
    )
    liger_kernel: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Liger's fused GPU kernels (RMSNorm, SwiGLU, RoPE) for the model. auto: on when liger_kernel is "
        "installed, the plan trains on CUDA GPUs and Liger patches the model's type (the plan says why); on: "
        "require it (an error where it cannot apply); off: never.",
    )
    group_by_length: bool = Field(True, description="Batch rows of similar length to cut padding.")
    packing: Literal["auto", "shared_prefix", "off"] = Field(
        "auto",
        description=(
            "Compute each prompt once: one row [prompt | chosen | rejected] (listwise: [prompt | r_1 | ... | r_N]) "
            "where each response sees the prompt and itself (a 4D attention mask, positions restarting after the "
            "prompt). Exact for causal decoders. auto: on for Bradley-Terry (approach.sft_weight's LM term included) "
            "and listwise decoders whose attention takes a custom mask (sdpa, eager), and for pointwise, process and "
            "generative (sft) ones only where hardware.context_parallel splits the rows (each example a packed row "
            "of its own), off elsewhere (encoders, "
            "flash-attention, pointwise, process and generative in one process), the plan says why; shared_prefix: "
            "require it (an error where it cannot apply); off: two (N) sequences per pair (ranking). On CPU a "
            "packed row over 512 columns attends by blocks (only the key ranges the mask allows, no mask tensor; "
            "plan.json's packed_attention says which)."
        ),
    )
    seed: int = Field(
        42, description="Seed for the new head's initialisation and the data order (the model's dropout is always off)."
    )
    logging_steps: PositiveInt = Field(10, description="Log metrics every N optimizer steps.")
    eval_steps: PositiveInt | None = Field(
        None, description="Evaluate on the validation split every N steps (default: at the end)."
    )
    save_steps: PositiveInt | None = Field(
        None, description="Checkpoint every N steps (default: at the end of each epoch)."
    )
    save_total_limit: PositiveInt = Field(2, description="Checkpoints kept on disk.")
    early_stopping: EarlyStopping | None = Field(None, description="Stop when the watched metric stops improving.")
    final_model: Literal["last", "best"] | None = Field(
        None,
        description=(
            "What RUN/model holds: the last step's weights, or the checkpoint whose validation best_metric "
            "scored best (needs eval_steps; a checkpoint is saved at every evaluation). Default: best when "
            "early_stopping is set (it watches its metric), else last."
        ),
    )
    best_metric: str | None = Field(
        None,
        description=(
            "Validation metric (metrics.jsonl name) that picks the best checkpoint; default per approach: "
            "eval/rm/accuracy (bradley_terry), eval/rm/loss (pointwise), eval/rm/step_accuracy (process), "
            "eval/sft/loss (generative). Losses and errors are better lower, the rest higher."
        ),
    )

    @model_validator(mode="after")
    def _length(self) -> TrainingSpec:
        if self.max_steps is not None:
            # max_steps wins; epochs is kept for the plan's time estimate only.
            return self
        if self.epochs is None:
            raise ValueError("give epochs or max_steps")
        return self

    @model_validator(mode="after")
    def _schedule(self) -> TrainingSpec:
        if self.min_learning_rate and self.lr_scheduler not in MIN_LR_SCHEDULES:
            raise ValueError(
                f"min_learning_rate applies to lr_scheduler {' or '.join(MIN_LR_SCHEDULES)}, not {self.lr_scheduler}"
            )
        if self.min_learning_rate >= self.learning_rate:
            raise ValueError("min_learning_rate must be below learning_rate")
        if "decay_ratio" in self.model_fields_set and self.lr_scheduler != "warmup_stable_decay":
            raise ValueError(f"decay_ratio applies to lr_scheduler warmup_stable_decay, not {self.lr_scheduler}")
        unknown = set(self.optimizer_args) - OPTIMIZER_ARGS
        if unknown:
            raise ValueError(
                f"optimizer_args: unknown {', '.join(sorted(unknown))} (known: {', '.join(sorted(OPTIMIZER_ARGS))})"
            )
        betas = self.optimizer_args.get("betas")
        if betas is not None and (not isinstance(betas, list) or len(betas) != 2):
            raise ValueError("optimizer_args.betas must be a list of two numbers, e.g. [0.9, 0.999]")
        return self

    @property
    def optim_name(self) -> str:
        """The name TrainingArguments.optim takes."""
        return OPTIMIZER_ALIASES.get(self.optimizer, self.optimizer)


# What optimizer_args may hold: Adam's and Lion's betas/eps, SGD's and schedule-free's own settings.
OPTIMIZER_ARGS = {"betas", "eps", "momentum", "dampening", "nesterov", "weight_lr_power", "r", "block_size"}
