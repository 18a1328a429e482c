"""TrainingArguments from the spec and the plan: the one place where rmspec settings meet Trainer's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainingArguments

from rmspec.plan import Plan


def batch_layout(spec: Any, plan: Plan | None) -> tuple[int, int, int]:
    """(micro batch per device, gradient accumulation, processes) from the plan, or from the spec
    alone (one process, no accumulation) when there is no plan (tests, benchmarks)."""
    if plan is not None:
        return plan.micro_batch_size, plan.gradient_accumulation_steps, plan.num_processes
    micro = spec.training.micro_batch_size
    micro = spec.training.global_batch_size if micro == "auto" else micro
    return micro, max(1, spec.training.global_batch_size // micro), 1


def liger_available() -> bool:
    import importlib.util

    import torch

    return torch.cuda.is_available() and importlib.util.find_spec("liger_kernel") is not None


def use_liger_kernel(spec: Any, plan: Plan | None) -> bool:
    """training.liger_kernel as the plan decided it (rmspec.plan.liger), checked again on the machine that
    trains (the plan may have been made elsewhere): `on` without CUDA or liger_kernel here is an error,
    auto quietly stays off. Without a plan (tests, benchmarks) auto means installed on CUDA."""
    setting = spec.training.liger_kernel
    if setting == "off":
        return False
    available = liger_available()
    if setting == "on" and not available:
        from rmspec.errors import RmspecError

        raise RmspecError(
            "training.liger_kernel: on, but this machine has no CUDA device or no liger_kernel",
            hint="pip install liger-kernel on the GPU machine, or write training.liger_kernel: auto",
        )
    if plan is not None and setting == "auto":
        return available and bool(plan.liger_kernel and plan.liger_kernel["enabled"])
    return available


def greater_is_better(spec: Any, metric: str | None) -> bool:
    """Early stopping states its direction; a best_metric's follows from its name."""
    from rmspec.spec.training import lower_is_better

    early = spec.training.early_stopping
    if early is not None and early.metric == metric:
        return bool(early.mode == "max")
    return not lower_is_better(metric or "")


def best_metric_name(metric: str) -> str:
    """'eval/rm/accuracy' -> 'accuracy' (Trainer prefixes 'eval_' itself)."""
    return metric.rsplit("/", 1)[-1].removeprefix("eval_")


def optimizer_arguments(tr: Any) -> dict[str, Any]:
    """TrainingArguments for the spec's optimizer and schedule: optim, its betas/eps, optim_args, and the
    scheduler's own settings (warmup_stable_decay's decay steps are set by the trainer, which knows the total)."""
    from rmspec.errors import RmspecError

    name = tr.optim_name
    if name.endswith("8bit") or name.startswith("lion"):
        import importlib.util

        import torch

        if not torch.cuda.is_available() or importlib.util.find_spec("bitsandbytes") is None:
            raise RmspecError(
                f"training.optimizer {tr.optimizer} runs on bitsandbytes' CUDA kernels, which this machine lacks "
                f"({'no CUDA device' if not torch.cuda.is_available() else 'bitsandbytes is not installed'})",
                hint="use adamw, adafactor, sgd or schedule_free_adamw here, or pip install bitsandbytes on a GPU machine",
            )
    if name == "schedule_free_adamw":
        import importlib.util

        if importlib.util.find_spec("schedulefree") is None:
            raise RmspecError(
                "training.optimizer schedule_free_adamw needs the schedulefree package", hint="pip install schedulefree"
            )
    out: dict[str, Any] = {"optim": name}
    extra = dict(tr.optimizer_args)
    betas = extra.pop("betas", None)
    if betas is not None:
        out["adam_beta1"], out["adam_beta2"] = float(betas[0]), float(betas[1])
    if "eps" in extra:
        out["adam_epsilon"] = float(extra.pop("eps"))
    if extra:  # transformers parses optim_args as "k=v,k=v" and converts per optimizer
        out["optim_args"] = ",".join(f"{k}={v}" for k, v in extra.items())
    if tr.lr_scheduler == "cosine_with_min_lr":
        out["lr_scheduler_kwargs"] = {"min_lr": tr.min_learning_rate}
    elif tr.lr_scheduler == "warmup_stable_decay":
        out["lr_scheduler_kwargs"] = {"min_lr_ratio": tr.min_learning_rate / tr.learning_rate}
    return out


def tracker_env(spec: Any, run_root: Path) -> list[str]:
    """report_to for Trainer: always none. rmspec's own trackers (rmspec.train.trackers) log
    metrics.jsonl's rows under its names; here only the check that they are installed."""
    from rmspec.train.trackers import check_installed

    check_installed(list(spec.tracking.backends))
    return ["none"]


def build_training_arguments(
    spec: Any,
    plan: Plan | None,
    output_dir: Path,
    *,
    has_validation: bool,
    report_to: list[str] | None = None,
    use_cpu: bool | None = None,
) -> TrainingArguments:
    tr = spec.training
    micro, accumulation, _ = batch_layout(spec, plan)
    if plan is None:  # no plan (tests, benchmarks): full precision, checkpointing only when the spec says on
        precision, checkpointing = "fp32", tr.gradient_checkpointing == "on"
    else:
        precision, checkpointing = plan.precision, plan.gradient_checkpointing
        if plan.gradient_checkpointing_by == "accelerate_fsdp":
            checkpointing = False  # FSDP wraps the layers itself (fsdp_activation_checkpointing); twice would fail

    from rmspec.spec.training_rules import selection_metric

    evaluate_periodically = has_validation and tr.eval_steps is not None
    metric = selection_metric(spec)
    best = metric is not None and evaluate_periodically
    save_steps = tr.save_steps
    if best and save_steps is None:
        save_steps = tr.eval_steps  # best-checkpoint selection needs a checkpoint at every evaluation
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=micro,
        per_device_eval_batch_size=max(micro, spec.eval.batch_size // 2),
        gradient_accumulation_steps=accumulation,
        learning_rate=tr.learning_rate,
        lr_scheduler_type=tr.lr_scheduler,
        **optimizer_arguments(tr),
        warmup_steps=tr.warmup_ratio,  # a float below 1 is a ratio of the total steps
        weight_decay=tr.weight_decay,
        max_grad_norm=tr.max_grad_norm,
        num_train_epochs=tr.epochs or 1.0,
        max_steps=tr.max_steps or -1,
        seed=tr.seed,
        data_seed=tr.seed,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        activation_checkpointing=checkpointing,
        logging_strategy="steps",
        logging_steps=tr.logging_steps,
        logging_first_step=True,
        eval_strategy="steps" if evaluate_periodically else "no",
        eval_steps=tr.eval_steps if evaluate_periodically else None,
        save_strategy="steps" if save_steps else "epoch",
        save_steps=save_steps or 500,
        save_total_limit=tr.save_total_limit,
        load_best_model_at_end=best,
        metric_for_best_model=best_metric_name(metric) if best and metric is not None else None,
        greater_is_better=greater_is_better(spec, metric) if best else None,
        remove_unused_columns=False,  # the collators pick the columns they need
        report_to=report_to if report_to is not None else ["none"],
        disable_tqdm=True,  # the parent draws the progress from metrics.jsonl
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
    )
    if use_cpu is not None:
        kwargs["use_cpu"] = use_cpu
    if use_liger_kernel(spec, plan):
        kwargs["use_liger_kernel"] = True  # fused RMSNorm/SwiGLU/RoPE kernels (training.liger_kernel)
    return TrainingArguments(**kwargs)
