"""`rmspec run` under hardware.context_parallel: N: the trainer's side of rmspec.train.context_parallel.

The world of accelerate's processes is cut into groups of N consecutive ranks (rank = group x N + place).
A group is one data-parallel replica that holds each row split over its N ranks:
- every rank of a group draws the same batches: accelerate's batch sharder is told the groups, not the
  processes (``shard_over_groups``), so the seeded sampler's order is dealt to the groups;
- the forward is rmspec.train.context_parallel.head_outputs over the group's own process group (a gloo or
  NCCL group of its own, apart from DDP's, so the attention's collectives never interleave with DDP's
  gradient buckets on one communicator), through ``split_head_outputs``: one reward per response of the
  packed batch, in the order of its read points, whatever the approach reads from them (Bradley-Terry's
  pairs: ``split_pair_rewards``; listwise's ranked lists: rmspec.train.listwise.list_rewards; pointwise's
  examples, one packed response each: rmspec.train.pointwise.score_outputs; process rewards, every labelled step of
  each example: rmspec.train.process.step_logits; a generative judge's LM head before every verdict token:
  rmspec.train.generative.GenerativeTrainer);
- the group's parameter gradients ADD UP to one process's, while DDP averages over every process: the split
  forward's outputs send their gradient back N times over (``sum_over_group``: their value unchanged, so the
  loss the Trainer logs is too), so DDP's mean over N x G processes is the mean over the G groups of each
  group's whole gradient, while a parameter the loss reads directly keeps its one gradient;
- figures summed over processes (tokens trained on) count each group once (``data_parallel_size``).
Evaluation (the validation split, during training and the final one) is split the same way: the evaluation and
prediction loaders are dealt to the groups (``shard_over_groups``), each batch's forward is the same split forward
with no backward, and the Trainer's gather keeps one rank's outputs per group (``gather_over_groups``), so each
row counts once; the last batches' repeats that keep the groups in step count in no loss (``rows_not_repeated``),
so the metrics are a one-process evaluation's. The run-level evaluation after the model is saved
(rmspec.evaluate: validation diagnostics, benchmarks) loads it in one process and scores whole rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from rmspec.inference.packed_forward import StatesAt


@dataclass(frozen=True)
class Groups:
    """This process's place: ``degree`` ranks per group, ``count`` groups, ``group`` its process group."""

    degree: int
    count: int
    index: int  # which group (the data-parallel rank)
    group: Any


def layout(world: int, degree: int) -> list[list[int]]:
    """The ranks of each group: consecutive ranks, so a group stays on one node where it can."""
    if degree < 1 or world % degree:
        raise ValueError(f"context_parallel {degree} does not divide the {world} processes")
    return [list(range(g * degree, (g + 1) * degree)) for g in range(world // degree)]


def build_groups(degree: int) -> Groups:
    """Every rank creates every group's process group (torch requires all ranks in each new_group call)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    mine = None
    for ranks in layout(world, degree):
        group = dist.new_group(ranks)
        if rank in ranks:
            mine = group
    return Groups(degree=degree, count=world // degree, index=rank // degree, group=mine)


def shard_over_groups(dataloader: Any, groups: Groups) -> Any:
    """``dataloader`` (accelerate's, prepared over every process) dealt to the groups instead: the ranks of a
    group get the same batches. accelerate's BatchSamplerShard reads num_processes and process_index at each
    iteration and length, and skip_first_batches (a resume) wraps this same sharder."""
    sharder = getattr(dataloader, "batch_sampler", None)
    if sharder is None or not hasattr(sharder, "process_index"):
        raise RuntimeError(
            f"context parallelism expects accelerate's batch sharder, found {type(sharder).__name__}: "
            "the ranks of a group would not see the same batches"
        )
    sharder.num_processes, sharder.process_index = groups.count, groups.index
    if groups.count == 1:  # no other group to keep in step: the last batch is its own rows, as in one process (its
        sharder.even_batches = False  # repeats would be computed at full length, then dropped: 19x one row's time)
    return dataloader


def gather_over_groups(accelerator: Any, groups: Groups, data: Any) -> Any:
    """accelerate's ``gather_for_metrics`` for a loader dealt to the groups (the Trainer's evaluation gather):
    ``data`` (tensors, the same on every rank of a group) gathered from every process, the first rank's kept in
    each group (its ranks evaluated the same rows), then the last batch's repeats dropped as gather_for_metrics
    drops them (the loader's ``remainder`` counts the groups' batches: the sharder was told the groups)."""
    from accelerate.utils import recursively_apply

    def one_per_group(t: torch.Tensor) -> torch.Tensor:
        per_rank = t.shape[0] // (groups.count * groups.degree)
        kept = t.reshape(groups.count, groups.degree, per_rank, *t.shape[1:])[:, 0]
        return kept.reshape(groups.count * per_rank, *t.shape[1:])

    kept = recursively_apply(one_per_group, accelerator.gather(data))
    state = accelerator.gradient_state
    if state.end_of_dataloader and state.remainder > 0:
        kept = recursively_apply(lambda t: t[: state.remainder], kept)
    return kept


def rows_not_repeated(gradient_state: Any, groups: Groups, batch_size: int) -> int | None:
    """How many rows of this group's evaluation batch are the dataset's own, where they are fewer than the batch:
    accelerate's even batches fill the last step's batches with repeats of the first rows (the dataset's own rows
    first, group after group: the ``remainder`` of the last step), and the loss of a batch is its rows' mean, so the
    loss of the last batch is its own rows' only, as one process computes it. None where every row is its own,
    or none is (a batch of repeats only: the gather drops all of it)."""
    if not gradient_state.end_of_dataloader or gradient_state.remainder <= 0:
        return None
    own = min(max(gradient_state.remainder - groups.index * batch_size, 0), batch_size)
    return own if 0 < own < batch_size else None


def sum_over_group(outputs: torch.Tensor, degree: int) -> torch.Tensor:
    """``outputs`` of a rank's share of the tokens (the split forward's, or a term computed from this rank's
    hidden states), their value kept and the gradient they send back ``degree`` times over. A rank's backward
    through them gives the parameters only its tokens' share of their gradient (the group's shares add up to one
    process's), and DDP or FSDP averages over every process: scaled so, the mean over the N x G processes is the
    mean over the G groups of each group's whole gradient. Only those shares are scaled: a parameter the loss
    reads directly (a learned Davidson tie's log nu, the head weights in ODIN's orthogonality term) has its
    whole gradient on every rank already, and the mean keeps it once."""
    return outputs + (degree - 1) * (outputs - outputs.detach())


def data_parallel_size(world: int, degree: int) -> int:
    return max(world // max(degree, 1), 1)


def prepare_model(model: Any, degree: int) -> Groups:
    """The groups, once ``model`` is known to take the context-parallel attention (ContextParallelError if not)."""
    from rmspec.inference.prefix_mask import model_config
    from rmspec.train.context_parallel import check_supported, register

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(f"context_parallel {degree} needs the processes' process group (accelerate launch)")
    check_supported(model_config(model))
    register()
    return build_groups(degree)


@contextlib.contextmanager
def split_step(model: Any, groups: Groups) -> Iterator[None]:
    """One training step (forward AND backward) with the split attention on and the group active. Gradient
    checkpointing recomputes each layer's forward inside the backward: there too its attention must gather the
    group's keys and values as its forward did (the recomputation's inputs, the rank's mask slice or its block
    plan included, are the ones the forward saved), and every rank of the group recomputes the same layers in the same order, so the
    gathers stay matched."""
    from rmspec.inference.packed_attention import step
    from rmspec.train.context_parallel import active

    with step(model), active(groups.group):
        yield


def split_head_outputs(
    model: Any, inputs: dict[str, torch.Tensor], groups: Groups, states: StatesAt | None = None
) -> torch.Tensor:
    """Head outputs [responses, num_labels] of a packed batch (PackedPairCollator's, PackedListCollator's or
    PackedScoresCollator's: the same on every rank of the group), each row split over the group: the equal of
    packed_forward.packed_head_outputs, one output per read point (``packed_ends``) in its order, on every rank.
    The one split forward every approach that trains split reads its rewards from, training and evaluating; its
    gradient is the group's to add up (``sum_over_group``). ``states`` is filled with the hidden states at this
    rank's share of its positions (context_parallel.head_outputs): what the caller computes from them is its
    rank's share too, and the caller scales it (rmspec.train.pair_extras.packed_pair_sft)."""
    from rmspec.inference.packed_attention import switched
    from rmspec.train.context_parallel import head_outputs
    from rmspec.train.packing import is_packed, packed_rows

    if not is_packed(inputs):
        raise ValueError("context parallelism splits prompt-once rows: this batch is not packed")
    with switched(model):
        outputs = head_outputs(model, packed_rows(inputs), groups.group, states)
    return sum_over_group(outputs, groups.degree) if torch.is_grad_enabled() else outputs


def split_pair_rewards(
    model: Any, inputs: dict[str, torch.Tensor], groups: Groups
) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) rewards of a PackedPairCollator batch (the same on every rank of the group), each
    row split over the group: the read points alternate chosen, rejected."""
    scores = split_head_outputs(model, inputs, groups)[:, 0]
    return scores[0::2], scores[1::2]


def attach(trainer: Any, model: Any, degree: int) -> None:
    """Train ``trainer`` with each row split over groups of ``degree`` ranks, or stop (exit 2) where this
    trainer is not the one wired: the plan refuses the others (rmspec.plan.context_parallel.run_refusal),
    and this checks what only the loaded model and data decide (the packing path, images)."""
    from rmspec.errors import RmspecError
    from rmspec.train.context_parallel import ContextParallelError
    from rmspec.train.packing import SHARED_PREFIX

    packing, why = getattr(trainer, "packing", (None, None))
    problem = None
    # A trainer says for itself whether it trains split (splits_rows): one with other outputs or terms (an SFT
    # term) is not split until it says so and is tested.
    splits_rows = getattr(trainer, "splits_rows", None)
    if splits_rows is None or not splits_rows():
        problem = (
            f"{type(trainer).__name__} is not trained split in this version "
            "(Bradley-Terry without sft_weight, listwise, pointwise, process and generative with method sft are)"
        )
    elif packing != SHARED_PREFIX:
        problem = f"the rows are not packed here ({why})"
    if problem is None:
        try:
            trainer.context_parallel = prepare_model(model, degree)
            return
        except ContextParallelError as exc:
            problem = str(exc)
    raise RmspecError(f"hardware.context_parallel {degree}: {problem}", "run with hardware.context_parallel: 1")
