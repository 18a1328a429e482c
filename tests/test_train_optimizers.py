"""training.optimizer / optimizer_args / the min-LR schedules: the learning rate at the last step is
min_learning_rate, and the plan's optimizer state is within 10% of what optimizer.state holds after a step."""

from __future__ import annotations

import json

import pytest
from transformers import TrainerCallback

import helpers.models
from helpers.trainer import as_dataset, pair_rows, write_spec
from rmspec.errors import RmspecError
from rmspec.plan.model_shape import shape_from_config
from rmspec.plan.optimizer_state import planned_optimizer, state_bytes
from rmspec.train.arguments import build_training_arguments
from rmspec.train.factory import build_trainer

tiny_models = helpers.models.tiny_models  # the shared fixture

CPU_OPTIMIZERS = ["adamw", "adamw_torch", "adafactor", "sgd", "schedule_free_adamw"]
MIN_LR = 2.5e-4


class StateAfterFirstStep(TrainerCallback):
    """Sum of tensor bytes in optimizer.state after the first optimizer step."""

    def __init__(self):
        self.bytes = None

    def on_step_end(self, args, state, control, optimizer=None, **kwargs):
        if state.global_step == 1:
            inner = getattr(optimizer, "optimizer", optimizer)
            self.bytes = sum(
                t.numel() * t.element_size()
                for s in inner.state.values()
                for t in s.values()
                if hasattr(t, "numel") and t.dim() > 0
            )


def _train(tmp_path, model_dir, optimizer: str, schedule: str, extra: str = ""):
    spec = write_spec(
        tmp_path,
        model_dir,
        approach="{kind: bradley_terry}",
        training=(
            f"{{max_steps: 7, learning_rate: 1.0e-2, min_learning_rate: {MIN_LR}, lr_scheduler: {schedule}, "
            f"warmup_ratio: 0.2, optimizer: {optimizer}, global_batch_size: 8, logging_steps: 1, seed: 0{extra}}}"
        ),
    ).spec
    from rmspec.train.modeling import load_model

    loaded = load_model(str(model_dir), spec.approach, seed=0)
    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=False, use_cpu=True)
    probe = StateAfterFirstStep()
    trainer = build_trainer(
        spec, loaded.model, loaded.tokenizer, args, as_dataset(pair_rows(loaded.tokenizer, 64, 0)), None, [probe]
    )
    trainer.decay_ratio = spec.training.decay_ratio
    trainer.train()
    return spec, trainer, probe


@pytest.mark.parametrize("schedule", ["cosine_with_min_lr", "warmup_stable_decay"])
@pytest.mark.parametrize("optimizer", CPU_OPTIMIZERS)
def test_the_last_step_ends_at_min_learning_rate_and_the_plan_sizes_the_state(
    tmp_path, tiny_models, optimizer, schedule
):
    extra = ", optimizer_args: {momentum: 0.9}" if optimizer == "sgd" else ""
    spec, trainer, probe = _train(tmp_path, tiny_models["llama"], optimizer, schedule, extra)
    logged = [row for row in trainer.state.log_history if "learning_rate" in row]
    assert logged[-1]["step"] == 7
    assert abs(logged[-1]["learning_rate"] - MIN_LR) < 1e-9
    peak = max(row["learning_rate"] for row in logged)
    assert abs(peak - 1.0e-2) < 1e-9  # the schedule reached the peak in between
    expected_cls = {"adafactor": "Adafactor", "sgd": "SGD", "schedule_free_adamw": "AdamWScheduleFree"}
    inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    assert type(inner).__name__ == expected_cls.get(optimizer, "AdamW")

    config = json.loads((tiny_models["llama"] / "config.json").read_text())
    shape = shape_from_config(config, "test")
    planned = state_bytes(shape, "score", planned_optimizer(spec.training), 4)
    assert probe.bytes is not None and probe.bytes > 0
    assert abs(planned - probe.bytes) <= 0.10 * probe.bytes, (planned, probe.bytes)


def test_optimizer_args_reach_the_optimizer(tmp_path, tiny_models):
    spec = write_spec(
        tmp_path,
        tiny_models["llama"],
        approach="{kind: bradley_terry}",
        training="{max_steps: 1, optimizer: adamw_torch, optimizer_args: {betas: [0.8, 0.95], eps: 1.0e-6}}",
    ).spec
    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=False, use_cpu=True)
    assert (args.optim, args.adam_beta1, args.adam_beta2, args.adam_epsilon) == ("adamw_torch", 0.8, 0.95, 1e-6)
    sgd = write_spec(
        tmp_path,
        tiny_models["llama"],
        approach="{kind: bradley_terry}",
        training="{max_steps: 1, optimizer: sgd, optimizer_args: {momentum: 0.9, nesterov: true}}",
    ).spec
    args = build_training_arguments(sgd, None, tmp_path / "ckpt", has_validation=False, use_cpu=True)
    assert args.optim == "sgd" and args.optim_args == "momentum=0.9,nesterov=True"


@pytest.mark.parametrize("optimizer", ["adamw_8bit", "lion"])
def test_bitsandbytes_optimizers_are_refused_without_cuda(tmp_path, tiny_models, optimizer):
    import torch

    from rmspec.errors import SpecError
    from rmspec.spec.training import TrainingSpec
    from rmspec.train.arguments import optimizer_arguments

    with pytest.raises(SpecError) as err:  # validate: a CPU spec
        write_spec(
            tmp_path,
            tiny_models["llama"],
            approach="{kind: bradley_terry}",
            training=f"{{max_steps: 1, optimizer: {optimizer}}}",
        )
    assert "training.optimizer" in str(err.value) and "CUDA" in str(err.value)
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    with pytest.raises(RmspecError) as err:  # the trainer: a GPU spec run where there is none
        optimizer_arguments(TrainingSpec(max_steps=1, optimizer=optimizer))
    assert "bitsandbytes" in err.value.message and "adafactor" in err.value.hint


def test_validate_refuses_a_min_learning_rate_the_schedule_ignores(tmp_path, tiny_models):
    from rmspec.errors import SpecError

    with pytest.raises(SpecError) as err:
        write_spec(
            tmp_path,
            tiny_models["llama"],
            approach="{kind: bradley_terry}",
            training="{max_steps: 1, min_learning_rate: 1.0e-6}",
        )
    assert "min_learning_rate" in str(err.value)


def test_validate_refuses_a_decay_ratio_the_schedule_ignores(tmp_path, tiny_models):
    from rmspec.errors import SpecError

    with pytest.raises(SpecError) as err:
        write_spec(
            tmp_path,
            tiny_models["llama"],
            approach="{kind: bradley_terry}",
            training="{max_steps: 1, lr_scheduler: cosine, decay_ratio: 0.2}",
        )
    assert "decay_ratio applies to lr_scheduler warmup_stable_decay" in str(err.value)
