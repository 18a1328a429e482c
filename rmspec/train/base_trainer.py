"""What the approach trainers share: per-batch metrics averaged over each logging interval."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import torch
from transformers import Trainer, TrainerCallback

from rmspec.train.sampling import SeededLengthGroupedSampler, SeededRandomSampler


def batch_tokens(inputs: dict) -> int:
    """Tokens a training batch holds (padding excluded where a 2D attention mask says so; a packed
    row's 4D mask does not, so its tokens are the row's)."""
    mask = inputs.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() == 2:
        return int(mask.sum().item())
    ids = inputs.get("input_ids")
    return int(ids.numel()) if isinstance(ids, torch.Tensor) else 0


class SamplerEpoch(TrainerCallback):
    """Tell the seeded sampler its epoch before each epoch's batches are drawn.

    accelerate's set_epoch reaches the sampler through DataLoaderShard(BatchSamplerShard(BatchSampler)),
    but not through the SkipBatchSampler(BatchSamplerShard(...)) of a multi-process resume in mid-epoch:
    the resumed epoch then replayed epoch 0's order (found by a requeued 2-node SLURM job, whose
    losses left the uninterrupted run's at the first step after the resume)."""

    def __init__(self, trainer: MetricsTrainer):
        self.trainer = trainer

    def on_epoch_begin(self, args, state, control, **kwargs):
        sampler = self.trainer._train_sampler
        if sampler is not None:
            # state.epoch is the progress so far (1.5 when resumed in the middle of epoch 1).
            sampler.set_epoch(math.floor(state.epoch + 1e-9))


class MetricsTrainer(Trainer):
    """A Trainer whose compute_loss records batch metrics; log() adds their interval mean.

    Metric names stay in the Trainer's flat style here (``accuracy``, ``eval_accuracy``) so its
    integrations (TensorBoard, wandb, early stopping) see them; the metrics.jsonl callback gives
    them the field's names (``train/rm/accuracy``).
    """

    # compute_loss returns a per-batch mean: the Trainer divides it by the accumulation steps.
    loss_is_scaled_for_ga: bool | None = False
    # warmup_stable_decay: share of the steps spent decaying (training.decay_ratio; set by the run).
    decay_ratio = 0.1
    # Trainer.__init__ sets it (transformers is untyped here): the annotation lets mypy type the
    # reads in create_scheduler before its assignment there.
    lr_scheduler: Any
    # hardware.context_parallel above 1: this process's group (set by rmspec.train.context_parallel_run.attach);
    # None on the class too, for a trainer made without __init__ to call compute_loss alone (tests/test_prm_train.py)
    context_parallel: Any = None

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        kind = str(getattr(self.args.lr_scheduler_type, "value", self.args.lr_scheduler_type))
        if self.lr_scheduler is not None or kind not in ("cosine_with_min_lr", "warmup_stable_decay"):
            return super().create_scheduler(num_training_steps, optimizer)
        from transformers.optimization import get_scheduler

        # transformers' schedules reach their end value one step after the last (step N of steps 0..N-1):
        # min_learning_rate is the rate the last step trains with, so the schedule ends at N - 1.
        horizon = max(1, num_training_steps - 1)
        warmup = min(self.args.get_warmup_steps(num_training_steps), horizon - 1) if horizon > 1 else 0
        kwargs = dict(self.args.lr_scheduler_kwargs or {})
        if kind == "warmup_stable_decay":  # its decay is in steps; only here is the total known (epochs -> steps)
            kwargs.setdefault("num_decay_steps", max(1, min(horizon - warmup, round(self.decay_ratio * horizon))))
            kwargs.setdefault("decay_type", "linear")
        self.lr_scheduler = get_scheduler(
            kind,
            optimizer=optimizer or self.optimizer,
            num_warmup_steps=warmup,
            num_training_steps=horizon,
            scheduler_specific_kwargs=kwargs,
        )
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def __init__(self, *args, group_by_length: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.group_by_length = group_by_length
        self._interval: dict[str, list[float]] = defaultdict(list)
        self._train_sampler: SeededRandomSampler | SeededLengthGroupedSampler | None = None
        self._tokens_local = 0  # tokens this process trained on since the last log
        self.num_tokens = 0  # tokens trained on so far, all processes (metrics.jsonl's num_tokens)
        # hardware.context_parallel above 1: this process's group (rmspec.train.context_parallel_run.attach)
        self.context_parallel: Any = None
        self.add_callback(SamplerEpoch(self))

    def get_train_dataloader(self):
        loader = super().get_train_dataloader()
        if self.context_parallel is None:
            return loader
        from rmspec.train.context_parallel_run import shard_over_groups

        return shard_over_groups(loader, self.context_parallel)  # a group's ranks split the same rows

    # hardware.context_parallel: evaluation and prediction split each row over the group as training does
    # (the compute_loss of a trainer that splits rows passes its group whether or not the model trains)
    def get_eval_dataloader(self, eval_dataset=None):
        return self._dealt_to_groups(super().get_eval_dataloader(eval_dataset))

    def get_test_dataloader(self, test_dataset):
        return self._dealt_to_groups(super().get_test_dataloader(test_dataset))

    def _dealt_to_groups(self, loader):
        if self.context_parallel is None:
            return loader
        from rmspec.train.context_parallel_run import shard_over_groups

        return shard_over_groups(loader, self.context_parallel)

    def evaluation_loop(self, *args, **kwargs):
        """The Trainer's loop; under context parallelism its gather keeps one rank's outputs per group (the
        group's ranks evaluated the same rows), so each row counts once. The loop itself resets the gather."""
        if self.context_parallel is None:
            return super().evaluation_loop(*args, **kwargs)
        import functools

        from rmspec.train.context_parallel_run import gather_over_groups

        self.gather_function = functools.partial(gather_over_groups, self.accelerator, self.context_parallel)
        try:
            return super().evaluation_loop(*args, **kwargs)
        finally:
            self.gather_function = self.accelerator.gather_for_metrics  # as the loop leaves it

    def _get_train_sampler(self, train_dataset=None):
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        if not self.group_by_length:
            self._train_sampler = SeededRandomSampler(len(dataset), self.args.seed)
        else:
            lengths = dataset["length"] if "length" in dataset.column_names else [len(x) for x in dataset["input_ids"]]
            self._train_sampler = SeededLengthGroupedSampler(
                lengths, self.args.per_device_train_batch_size, self.args.seed
            )
        return self._train_sampler

    # Evaluation order only matters where metrics read rows in dataset order (pointwise groups).
    sort_eval_by_length = False

    def _get_eval_sampler(self, eval_dataset):
        if not self.sort_eval_by_length or eval_dataset is None or "length" not in eval_dataset.column_names:
            return super()._get_eval_sampler(eval_dataset)
        lengths = eval_dataset["length"]
        # Longest first: similar lengths share a batch, so little padding is computed.
        return sorted(range(len(lengths)), key=lambda i: -lengths[i])

    def training_step(self, model, inputs, *args, **kwargs):
        self._tokens_local += batch_tokens(inputs)
        if self.context_parallel is not None:
            from rmspec.train.context_parallel_run import split_step

            with split_step(model, self.context_parallel):  # the backward's recomputation attends split too
                return super().training_step(model, inputs, *args, **kwargs)
        from rmspec.train.packing import may_attend_by_blocks

        if may_attend_by_blocks(inputs):
            from rmspec.inference.packed_attention import step

            with step(model):  # a recomputed layer attends by blocks, as its forward did
                return super().training_step(model, inputs, *args, **kwargs)
        return super().training_step(model, inputs, *args, **kwargs)

    def record(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self._interval[key].append(value)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._interval:  # a training log (evaluation logs carry eval_loss)
            keys = sorted(self._interval)
            local = torch.tensor(
                [sum(self._interval[k]) for k in keys] + [float(len(self._interval[keys[0]]))],
                device=self.args.device,
                dtype=torch.float64,
            )
            # Every rank calls log(); sum over ranks so the figures cover the global batch.
            total = self.accelerator.reduce(local, reduction="sum") if self.accelerator.num_processes > 1 else local
            count = max(total[-1].item(), 1.0)
            for i, key in enumerate(keys):
                logs[key] = total[i].item() / count
            self._interval.clear()
        if "loss" in logs:
            tokens = torch.tensor([float(self._tokens_local)], device=self.args.device, dtype=torch.float64)
            if self.accelerator.num_processes > 1:
                tokens = self.accelerator.reduce(tokens, reduction="sum")
            if self.context_parallel is not None:  # the ranks of a group all counted the group's rows
                tokens = tokens / self.context_parallel.degree
            self.num_tokens += int(tokens.item())
            self._tokens_local = 0
            logs["num_tokens"] = self.num_tokens
        super().log(logs, start_time)


class ScoreTrainer(MetricsTrainer):
    """Trainers of a score head (Bradley-Terry, pointwise): evaluation hands compute_metrics the
    outputs of compute_loss, shaped by ``eval_outputs``."""

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss, out = self.compute_loss(model, inputs, return_outputs=True)
            own = self._own_rows()
            if own is not None:  # the batch ends in repeats: its loss is its own rows', as in one process
                loss = self.first_rows_loss(out, inputs, own)
        if prediction_loss_only:
            return loss.detach(), None, None
        predictions, labels = self.eval_outputs(out, inputs)
        return loss.detach(), predictions, labels

    def eval_outputs(self, out: dict, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(predictions, labels) for compute_metrics."""
        raise NotImplementedError

    def _own_rows(self) -> int | None:
        """Under context parallelism, how many rows of this evaluation batch are the dataset's own where the rest
        are accelerate's even-batch repeats (rmspec.train.context_parallel_run.rows_not_repeated); None: all."""
        if self.context_parallel is None:
            return None
        from rmspec.train.context_parallel_run import rows_not_repeated

        return rows_not_repeated(self.accelerator.gradient_state, self.context_parallel, self.args.eval_batch_size)

    def first_rows_loss(self, out: dict, inputs: dict, rows: int) -> torch.Tensor:
        """The loss of the batch's first ``rows`` rows from compute_loss's outputs ``out`` (a trainer that splits
        rows over a context-parallel group: its last evaluation batch may end in repeats)."""
        raise NotImplementedError(f"{type(self).__name__} does not evaluate split")
