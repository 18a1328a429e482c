"""Cross-field rules of `training:` that need other sections: the best-checkpoint metric (per approach),
final_model against early stopping and the validation split, and optimizers that need CUDA."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rmspec.spec.base import Problem

CUDA_OPTIMIZERS = ("adamw_8bit", "lion", "lion_32bit", "lion_8bit")  # bitsandbytes kernels


def valid_best_metrics(approach: Any) -> tuple[str, ...]:
    """The validation metrics the spec's `approach:` section produces that may pick the final model
    (default first): its class's `best_metrics` (rmspec.spec.approach)."""
    return tuple(type(approach).best_metrics)


def selection_metric(spec: Any) -> str | None:
    """The metric that picks RUN/model, or None when RUN/model is the last step."""
    tr = spec.training
    if final_model(spec) != "best":
        return None
    if tr.best_metric is not None:
        return str(tr.best_metric)
    if tr.early_stopping is not None:
        return str(tr.early_stopping.metric)
    return valid_best_metrics(spec.approach)[0]


def final_model(spec: Any) -> str:
    tr = spec.training
    if tr.final_model is not None:
        return str(tr.final_model)
    return "best" if tr.early_stopping is not None else "last"


def best_checkpoint_rules(spec: Any) -> Iterator[Problem]:
    tr = spec.training
    valid = valid_best_metrics(spec.approach)
    if tr.best_metric is not None and tr.best_metric not in valid:
        yield (
            ("training", "best_metric"),
            f"{tr.best_metric!r} is not a validation metric of {spec.approach.kind} ({', '.join(valid)})",
            f"use one of: {', '.join(valid)}",
        )
    if tr.early_stopping is not None and tr.final_model == "last":
        yield (
            ("training", "final_model"),
            "early stopping keeps the checkpoint its metric scored best, so final_model cannot be last",
            "write final_model: best, or remove early_stopping",
        )
    if tr.early_stopping is not None and tr.best_metric is not None and tr.best_metric != tr.early_stopping.metric:
        yield (
            ("training", "best_metric"),
            f"best_metric {tr.best_metric} differs from early_stopping.metric {tr.early_stopping.metric}; "
            "one metric picks the best checkpoint and stops the run",
            "give both the same metric (or leave best_metric out)",
        )
    if tr.final_model == "best":
        split = spec.data.split
        if split.validation_fraction is None and split.validation_source is None:
            yield (
                ("training", "final_model"),
                "final_model: best needs a validation split",
                "set data.split.validation_fraction",
            )
        if tr.eval_steps is None:
            yield (
                ("training", "final_model"),
                "final_model: best needs periodic evaluation",
                "set training.eval_steps (a checkpoint is kept at every evaluation)",
            )


def optimizer_needs_cuda(spec: Any) -> Iterator[Problem]:
    if spec.training.optimizer in CUDA_OPTIMIZERS and spec.hardware.device == "cpu":
        yield (
            ("training", "optimizer"),
            f"{spec.training.optimizer} runs on bitsandbytes' CUDA kernels; this spec trains on CPU",
            "use adamw, adafactor, sgd or schedule_free_adamw on CPU",
        )
