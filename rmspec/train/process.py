"""Process reward models: a 2-label token classifier read at the last token of every step.

The loss is the token-classification cross-entropy of TRL's PRMTrainer (mean over the labelled
tokens of the batch; every other token is -100). `train_on: last_step` keeps only each row's
last labelled token during training (an outcome model); evaluation always scores every step.

Split (hardware.context_parallel: N): each example becomes a packed row of one response (PackedStepCollator,
rmspec.inference.prefix_mask's layout, as pointwise's) whose read points are its labelled tokens, every step's
last, not one per response: the split forward (rmspec.train.context_parallel_run.split_head_outputs) reads the head
at any flat index of the row, on the rank that holds it, so the steps come back whole on each rank from the one
split forward pairs, lists and pointwise examples use (tests/test_context_parallel_process.py). One process keeps
its padded batches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rmspec.evaluate.scoring_rules import first_error
from rmspec.inference.packed_forward import packed_head_outputs
from rmspec.inference.padding import pad_right
from rmspec.inference.process import correct_probability as _probability
from rmspec.train.base_trainer import ScoreTrainer
from rmspec.train.packing import is_packed, pack_examples, packed_batch, packed_rows
from rmspec.train.rewards import position_ids_from_mask

IGNORE = -100


@dataclass
class StepCollator:
    """Batches of input_ids [B, T] and per-token labels [B, T] (-100 on padding and unlabelled tokens)."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        ids, mask = pad_right([r["input_ids"] for r in rows], self.pad_token_id, self.pad_to_multiple_of)
        labels = torch.full_like(ids, IGNORE)
        for i, r in enumerate(rows):
            labels[i, : len(r["labels"])] = torch.as_tensor(r["labels"], dtype=torch.long)
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if rows and rows[0].get("token_type_ids") is not None:
            batch["token_type_ids"] = pad_right([r["token_type_ids"] for r in rows], 0, self.pad_to_multiple_of)[0]
        return batch


@dataclass
class PackedStepCollator:
    """Process batches as packed rows, where hardware.context_parallel splits them: each example one group of one
    response (split_shared_prefix keeps its last token as the response), several short ones to a row; the packed
    keys as PackedPairCollator's, with ``packed_ends`` [P] every labelled token (example order, then position: the
    split forward's read points), ``step_labels`` [P] their labels, ``step_example`` [P] the example of each and
    ``step_count`` [B] each example's labelled tokens."""

    pad_token_id: int
    several_per_row: bool = True

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        packed, firsts = pack_examples(rows, self.pad_token_id, self.several_per_row)
        reads: list[int] = []
        labels: list[int] = []
        example: list[int] = []
        count: list[int] = []
        for k, (r, first) in enumerate(zip(rows, firsts, strict=True)):
            steps = [(j, int(y)) for j, y in enumerate(r["labels"]) if int(y) != IGNORE]
            reads += [first + j for j, _ in steps]
            labels += [y for _, y in steps]
            example += [k] * len(steps)
            count.append(len(steps))
        return packed_batch(
            replace(packed, ends=torch.tensor(reads, dtype=torch.long)),  # every labelled token a read point
            step_labels=torch.tensor(labels, dtype=torch.long),
            step_example=torch.tensor(example, dtype=torch.long),
            step_count=torch.tensor(count, dtype=torch.long),
        )


def step_logits(model: Any, inputs: dict[str, torch.Tensor], split: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels): [B, T, 2] and [B, T] of a padded batch (every token), or [P, 2] and [P] at the labelled
    tokens of a packed one (PackedStepCollator's), each row split over the context-parallel group ``split``
    (rmspec.train.context_parallel_run.Groups) where one is given: the same on every rank of the group."""
    if split is not None:
        from rmspec.train.context_parallel_run import split_head_outputs

        return split_head_outputs(model, inputs, split), inputs["step_labels"]
    if is_packed(inputs):
        return packed_head_outputs(model, packed_rows(inputs)), inputs["step_labels"]
    mask = inputs["attention_mask"]
    extra = {} if inputs.get("token_type_ids") is None else {"token_type_ids": inputs["token_type_ids"]}
    logits = model(
        input_ids=inputs["input_ids"], attention_mask=mask, position_ids=position_ids_from_mask(mask), **extra
    ).logits
    return logits, inputs["labels"]


def last_point_only(labels: torch.Tensor, example: torch.Tensor) -> torch.Tensor:
    """A packed batch's labels [P] with only each example's last labelled token kept (last_step_only's rule)."""
    last = torch.ones_like(example, dtype=torch.bool)
    last[:-1] = example[1:] != example[:-1]
    return labels.masked_fill(~last, IGNORE)


def by_example(values: torch.Tensor, inputs: dict[str, torch.Tensor], fill: float) -> torch.Tensor:
    """A packed batch's per-step ``values`` [P] laid out [B, most steps], ``fill`` where an example has fewer."""
    count, example = inputs["step_count"], inputs["step_example"]
    place = torch.arange(example.numel(), device=example.device) - (torch.cumsum(count, 0) - count)[example]
    out = torch.full((count.numel(), max(int(count.max()), 1)), fill, dtype=values.dtype, device=values.device)
    out[example, place] = values
    return out


def last_step_only(labels: torch.Tensor) -> torch.Tensor:
    """Keep each row's last labelled token, -100 elsewhere."""
    labelled = labels != IGNORE
    positions = torch.arange(labels.shape[1], device=labels.device).expand_as(labels)
    last = torch.where(labelled, positions, torch.full_like(positions, -1)).max(dim=1).values
    keep = positions == last.unsqueeze(1)
    return torch.where(keep & labelled, labels, torch.full_like(labels, IGNORE))


def step_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the labelled tokens ([B, T, 2] logits, [B, T] labels in {0, 1, -100})."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)


def correct_probability(logits: torch.Tensor) -> torch.Tensor:
    """P(step correct) per token (the scoring engine's rule, so training and scoring agree)."""
    return _probability(logits.float())


class ProcessTrainer(ScoreTrainer):
    def __init__(self, *args, train_on: str = "all_steps", **kwargs):
        super().__init__(*args, **kwargs)
        self.train_on = train_on

    def splits_rows(self) -> bool:
        """Whether hardware.context_parallel can split this trainer's rows (rmspec.train.context_parallel_run.attach):
        the loss reads only the head at the labelled tokens, which every rank of the group holds whole, so both
        train_on settings train split as in one process (tests/test_context_parallel_process.py)."""
        return type(self) is ProcessTrainer

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # each row split over the context-parallel group where there is one, in training and evaluation
        split = self.context_parallel
        logits, labels = step_logits(model, inputs, split)
        if model.training and self.train_on == "last_step":
            labels = last_point_only(labels, inputs["step_example"]) if is_packed(inputs) else last_step_only(labels)
        loss = step_loss(logits, labels)
        if model.training:
            with torch.no_grad():
                on = labels != IGNORE
                prob = correct_probability(logits.detach())[on]
                gold = labels[on]
                self.record(
                    {
                        "step_accuracy": ((prob >= 0.5).long() == gold).float().mean().item() if gold.numel() else 0.0,
                        "wrong_step_share": (gold == 0).float().mean().item() if gold.numel() else 0.0,
                    }
                )
        return (loss, {"logits": logits, "labels": labels}) if return_outputs else loss

    def first_rows_loss(self, out: dict, inputs: dict, rows: int) -> torch.Tensor:
        if not is_packed(inputs):
            return step_loss(out["logits"][:rows], out["labels"][:rows])
        keep = inputs["step_example"] < rows
        return step_loss(out["logits"][keep], out["labels"][keep])

    def eval_outputs(self, out, inputs):
        if not is_packed(inputs):
            return correct_probability(out["logits"]), inputs["labels"]
        # [B, most steps] as the padded batch's [B, T] reads: process_metrics keeps the labelled places
        probability = by_example(correct_probability(out["logits"]), inputs, float(IGNORE))
        return probability, by_example(out["labels"], inputs, IGNORE)


def process_metrics(threshold: float = 0.5):
    """compute_metrics: step accuracy, AUROC of P(correct) against the step labels, first-error accuracy."""

    def compute(eval_pred) -> dict[str, float]:
        probs = np.asarray(eval_pred.predictions, dtype=np.float64)
        labels = np.asarray(eval_pred.label_ids)
        rows = [(p[lab != IGNORE], lab[lab != IGNORE]) for p, lab in zip(probs, labels)]
        return step_metrics([list(p) for p, _ in rows], [list(lab) for _, lab in rows], threshold)

    return compute


def step_metrics(probs: list[list[float]], labels: list[list[int]], threshold: float = 0.5) -> dict[str, float]:
    """Validation metrics from per-row step probabilities and 0/1 step labels."""
    from sklearn.metrics import roc_auc_score

    flat_p = np.array([p for row in probs for p in row], dtype=np.float64)
    flat_y = np.array([y for row in labels for y in row], dtype=np.int64)
    out: dict[str, float] = {}
    if flat_y.size:
        out["step_accuracy"] = float(((flat_p >= threshold).astype(np.int64) == flat_y).mean())
        out["wrong_step_share"] = float((flat_y == 0).mean())
        if 0 < flat_y.sum() < flat_y.size:
            out["auroc"] = float(roc_auc_score(flat_y, flat_p))
    rows = [(p, y) for p, y in zip(probs, labels) if len(y)]
    if rows:
        gold = [next((i for i, v in enumerate(y) if v == 0), -1) for _, y in rows]
        pred = [first_error(list(p), threshold) for p, _ in rows]
        out["first_error_accuracy"] = float(np.mean([a == b for a, b in zip(gold, pred)]))
    return out
