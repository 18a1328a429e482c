"""Listwise training: Plackett-Luce over the N scored responses of each prompt.

Unpacked: the batch holds every response of every prompt as its own sequence (sum of N_i rows),
one forward pass; `list_index` [B, N_max] says which flat row is response k of prompt b (-1 for a
prompt with fewer than N_max responses).

Packed (decoders, training.packing auto or shared_prefix): PackedListCollator lays each prompt and
its N responses out as one shared-prefix row [prompt | r_1 | ... | r_N] (rmspec.inference.prefix_mask,
the layout pairs use): each response attends to the prompt and to itself, its positions continue
from the prompt's end, and its reward is read at its last token, so the rewards equal the N
separate sequences' (tests/test_packing_listwise.py). `list_index` then points into the responses'
ends in the same order.

Split (hardware.context_parallel: N): each packed row is cut over the N ranks of a group and the K rewards
of every list come back whole on each rank (rmspec.train.context_parallel_run.split_head_outputs, the one
split forward Bradley-Terry reads its pairs from too); the loss is the one-process loss, backpropagated N
times over so the group's gradients add up (tests/test_context_parallel_listwise.py). Evaluation splits the
rows the same way, with no backward (tests/test_context_parallel_eval.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rmspec.inference.packed_forward import packed_head_outputs
from rmspec.inference.padding import pad_right
from rmspec.inference.prefix_mask import pack_groups, split_shared_prefix
from rmspec.train.base_trainer import ScoreTrainer
from rmspec.train.objectives.listwise import plackett_luce_loss, ranking_metrics
from rmspec.train.packing import is_packed, packed_batch, packed_rows
from rmspec.train.rewards import forward_scores


@dataclass
class ListCollator:
    """input_ids [sum N_i, T]; list_index, scores [B, N_max]; mask True where a response exists."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        n_max = max(len(r["responses_input_ids"]) for r in rows)
        sequences: list[list[int]] = []
        types: list[list[int]] = []
        index = torch.full((len(rows), n_max), -1, dtype=torch.long)
        scores = torch.zeros((len(rows), n_max), dtype=torch.float32)
        for b, r in enumerate(rows):
            for k, ids in enumerate(r["responses_input_ids"]):
                index[b, k] = len(sequences)
                sequences.append(ids)
                scores[b, k] = float(r["scores"][k])
            if r.get("responses_token_type_ids"):
                types.extend(r["responses_token_type_ids"])
        ids, mask = pad_right(sequences, self.pad_token_id, self.pad_to_multiple_of)
        batch = {"input_ids": ids, "attention_mask": mask, "list_index": index, "list_scores": scores}
        if types:  # BERT text pairs: segment 1 marks the response
            batch["token_type_ids"] = pad_right(types, 0, self.pad_to_multiple_of)[0]
        return batch


def _list_targets(rows: list[dict[str, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
    """list_index and list_scores [B, N_max]: response k of prompt b is flat entry index[b, k]
    (prompts in order, responses in order; -1 where a prompt has fewer than N_max)."""
    n_max = max(len(r["responses_input_ids"]) for r in rows)
    index = torch.full((len(rows), n_max), -1, dtype=torch.long)
    scores = torch.zeros((len(rows), n_max), dtype=torch.float32)
    flat = 0
    for b, r in enumerate(rows):
        for k in range(len(r["responses_input_ids"])):
            index[b, k] = flat
            scores[b, k] = float(r["scores"][k])
            flat += 1
    return index, scores


@dataclass
class PackedListCollator:
    """Listwise batches as shared-prefix rows [prompt | r_1 | ... | r_N] (several short prompts may
    share a row); the packed keys as PackedPairCollator's, plus list_index and list_scores."""

    pad_token_id: int
    several_per_row: bool = True

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        groups = [split_shared_prefix([list(ids) for ids in r["responses_input_ids"]]) for r in rows]
        packed = pack_groups(groups, self.pad_token_id, several_per_row=self.several_per_row)
        index, scores = _list_targets(rows)
        return packed_batch(packed, list_index=index, list_scores=scores)


def list_rewards(model: Any, inputs: dict[str, torch.Tensor], split: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(rewards [B, N_max], mask [B, N_max]) from one forward pass over every response (N sequences
    per prompt, or the packed rows of PackedListCollator), each packed row split over the context-parallel
    group ``split`` (rmspec.train.context_parallel_run.Groups) where one is given: the same K rewards per
    list on every rank of the group, read on the rank that holds each response's last token."""
    if split is not None:
        from rmspec.train.context_parallel_run import split_head_outputs

        flat = split_head_outputs(model, inputs, split)[:, 0]
    elif is_packed(inputs):
        flat = packed_head_outputs(model, packed_rows(inputs))[:, 0]
    else:
        flat = forward_scores(model, inputs["input_ids"], inputs["attention_mask"], inputs.get("token_type_ids"))[:, 0]
    index = inputs["list_index"]
    mask = index >= 0
    return flat[index.clamp(min=0)].masked_fill(~mask, 0.0), mask


class ListwiseTrainer(ScoreTrainer):
    sort_eval_by_length = True  # ranking metrics do not depend on the order of prompts

    def __init__(self, *args, top_k: int | None = None, center_rewards_coefficient: float | None = None, **kwargs):
        kwargs.setdefault("compute_metrics", compute_ranking_metrics)
        super().__init__(*args, **kwargs)
        self.top_k = top_k
        self.center_rewards_coefficient = center_rewards_coefficient

    def splits_rows(self) -> bool:
        """Whether hardware.context_parallel can split this trainer's rows (rmspec.train.context_parallel_run.attach):
        the loss reads only the rewards, which every rank of the group holds whole, so top_k and the centring
        term train split as they do in one process (tests/test_context_parallel_listwise.py)."""
        return type(self) is ListwiseTrainer

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # each row split over the context-parallel group where there is one, in training and evaluation
        split = self.context_parallel
        rewards, mask = list_rewards(model, inputs, split)
        scores = inputs["list_scores"]
        loss = self.list_loss(rewards, scores, mask)
        if model.training:
            metrics = ranking_metrics(rewards, scores, mask)
            self.record({"accuracy": metrics["pair_accuracy"], "kendall_tau": metrics["kendall_tau"]})
        if return_outputs:
            return loss, {"rewards": rewards, "scores": scores, "mask": mask}
        return loss

    def list_loss(self, rewards: torch.Tensor, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The lists' loss from their rewards [B, N_max] (Plackett-Luce, top_k, the centring term)."""
        loss = plackett_luce_loss(rewards, scores, mask, self.top_k)
        if self.center_rewards_coefficient:
            loss = loss + self.center_rewards_coefficient * (rewards[mask] ** 2).mean()
        return loss

    def first_rows_loss(self, out: dict, inputs: dict, rows: int) -> torch.Tensor:
        return self.list_loss(out["rewards"][:rows], out["scores"][:rows], out["mask"][:rows])

    def eval_outputs(self, out, inputs):
        # [B, N, 3]: the evaluation loop pads dim 1 with -100 across batches of different N, so the
        # mask channel is read as "== 1".
        preds = torch.stack([out["rewards"].float(), out["scores"].float(), out["mask"].float()], dim=2)
        return preds, torch.zeros(preds.shape[0], device=preds.device)


def compute_ranking_metrics(eval_pred) -> dict[str, float]:
    """Pair accuracy over all ordered pairs with different labelled scores (as `accuracy`, the
    name early stopping and the results read) and the mean per-prompt Kendall tau-b."""
    p = torch.from_numpy(np.asarray(eval_pred.predictions, dtype=np.float64))
    rewards, scores, mask = p[..., 0], p[..., 1], p[..., 2] == 1
    m = ranking_metrics(rewards, scores, mask)
    valid = mask.sum(1) > 0
    return {
        "accuracy": m["pair_accuracy"],
        "kendall_tau": m["kendall_tau"],
        "ranked_pairs": m["ranked_pairs"],
        "mean_reward": float(rewards[mask].mean()) if valid.any() else float("nan"),
    }
