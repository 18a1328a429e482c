"""Generative (SFT-based) judge: causal-LM loss on assistant tokens only; evaluation generates
the verdict and parses it with the spec's pattern.

Split (hardware.context_parallel: N): each example becomes a packed row of one response (PackedLMCollator,
rmspec.inference.prefix_mask's layout, as pointwise's and process's) whose read points are the positions whose
next token is a label; the one split forward (rmspec.train.context_parallel_run.split_head_outputs) reads the LM
head there only (transformers' logits_to_keep: no vocabulary logits elsewhere), and the loss is the cross-entropy
of those logits, normalised as the Trainer normalises the model's own loss (``num_items_in_batch``), so it
equals the padded one process's (tests/test_context_parallel_generative.py). One process keeps its padded batches.
The verdicts the final evaluation generates are written by the main process alone, on whole rows (judge_metrics).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from rmspec.train.base_trainer import MetricsTrainer
from rmspec.train.packing import pack_examples, packed_batch

IGNORE = -100


@dataclass
class PackedLMCollator:
    """Judge batches as packed rows, where hardware.context_parallel splits them: each example one group of one
    response (split_shared_prefix keeps its last token as the response), several short ones to a row; the packed
    keys (packing.packed_batch), with ``packed_ends`` [P] every position whose next token is a label (example
    order, then position: the split forward's read points) and ``labels`` [P] those next tokens, also as
    ``shift_labels`` (what the Trainer counts for ``num_items_in_batch``: the padded batch's ``labels[..., 1:]``)."""

    pad_token_id: int
    several_per_row: bool = True

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        packed, firsts = pack_examples(rows, self.pad_token_id, self.several_per_row)
        reads: list[int] = []
        targets: list[int] = []
        for r, first in zip(rows, firsts, strict=True):
            labels = list(r["labels"])[: len(r["input_ids"])]
            for j in range(len(labels) - 1):  # the logits at j predict the token at j + 1
                if int(labels[j + 1]) != IGNORE:
                    reads.append(first + j)
                    targets.append(int(labels[j + 1]))
        labels = torch.tensor(targets, dtype=torch.long)
        ends = torch.tensor(reads, dtype=torch.long)
        return packed_batch(replace(packed, ends=ends), labels=labels, shift_labels=labels.clone())


class GenerativeTrainer(MetricsTrainer):
    """The Trainer's own causal-LM loss (labels are -100 outside assistant turns, shifted inside
    the model, normalised over the tokens of the whole accumulated batch)."""

    loss_is_scaled_for_ga: bool | None = None  # back to the Trainer's own rule for model-computed losses

    def splits_rows(self) -> bool:
        """Whether hardware.context_parallel can split this trainer's rows (rmspec.train.context_parallel_run.attach):
        text rows packed by PackedLMCollator (a VLM judge's pictures are not split)."""
        return type(self) is GenerativeTrainer and isinstance(self.data_collator, PackedLMCollator)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.context_parallel is not None:
            return self._split_loss(model, inputs, return_outputs, num_items_in_batch)
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        if model.training:
            with torch.no_grad():
                logits = outputs.logits[:, :-1]
                labels = inputs["labels"][:, 1:]
                mask = labels != -100
                if mask.any():
                    hit = (logits.argmax(-1) == labels) & mask
                    self.record({"token_accuracy": hit.sum().item() / mask.sum().item()})
        return (loss, outputs) if return_outputs else loss

    def _split_loss(self, model, inputs, return_outputs, num_items_in_batch):
        """The Trainer's causal-LM loss (transformers' ForCausalLMLoss, then Trainer.compute_loss's scaling) from
        the LM head's logits at the read points of a PackedLMCollator batch, each row split over the group. The
        Trainer gathered ``num_items_in_batch`` over every process, each group's labels once per rank, and
        multiplies by every process: the group's N cancel, so the expression is one process's."""
        from rmspec.train.context_parallel_run import split_head_outputs

        split = self.context_parallel
        logits = split_head_outputs(model, inputs, split)  # [P, vocabulary], the same on every rank of the group
        loss = split_lm_loss(logits, inputs["labels"], num_items_in_batch)
        if (
            self.args.average_tokens_across_devices
            and self.model_accepts_loss_kwargs
            and num_items_in_batch is not None
        ):
            loss = loss * self.accelerator.num_processes
        if model.training:
            with torch.no_grad():
                labels = inputs["labels"]
                if labels.numel():
                    self.record({"token_accuracy": (logits.argmax(-1) == labels).float().mean().item()})
        return (loss, {"logits": logits}) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        if self.context_parallel is None:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        # split: the loss only (nothing reads a judge's evaluation logits; the verdicts are generated apart)
        inputs = self._prepare_inputs(inputs)
        count = self._get_num_items_in_batch([inputs], self.args.device)
        with torch.no_grad(), self.compute_loss_context_manager():  # autocast where the Trainer's would be
            loss = self.compute_loss(model, inputs, num_items_in_batch=count)
        return loss.detach().mean(), None, None


def split_lm_loss(logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
    """transformers' ForCausalLMLoss on logits [P, vocabulary] already at the shifted positions, labels [P]: the
    summed cross-entropy (in fp32) over ``num_items_in_batch`` where given, else the mean."""
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = F.cross_entropy(logits.float(), labels, ignore_index=IGNORE, reduction=reduction)
    if reduction == "sum":
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def split_prompt(input_ids: list[int], labels: list[int]) -> tuple[list[int], list[int]]:
    """(prompt, target) of a row: the target is the last assistant turn (the last run of labels
    that are not -100), the prompt everything before it."""
    end = len(labels)
    while end > 0 and labels[end - 1] == -100:
        end -= 1
    start = end
    while start > 0 and labels[start - 1] != -100:
        start -= 1
    return input_ids[:start], input_ids[start:end]


def parse_verdict(text: str, pattern: str) -> str | None:
    """The verdict as evaluation and `rmspec serve` read it (rmspec.inference.judge.parse_verdict): the
    group that matched; none when the text names two different verdicts (not the first of them)."""
    from rmspec.inference.judge import parse_verdict as read

    return read(text, pattern)


@torch.no_grad()
def judge_metrics(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    pattern: str,
    *,
    max_new_tokens: int = 64,
    batch_size: int = 8,
    encoder: Any = None,
) -> dict[str, float]:
    """Greedy generation on each row's prompt; parse rate and agreement with the reference verdict.
    `encoder` (a VLM judge's, rmspec.vision.collate.VisionEncoder): each prompt is read with its row's
    images (rmspec.vision.judge.generate_with_images), as training read it."""
    model.eval()
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # generation continues from the right edge
    parsed = agreed = labelled = 0
    examples: list[dict[str, str | None]] = []
    try:
        for i in range(0, len(rows), batch_size):
            chunk = rows[i : i + batch_size]
            prompts, targets = zip(*(split_prompt(r["input_ids"], r["labels"]) for r in chunk))
            if any(r.get("images") for r in chunk) and encoder is None:  # never judged without its pictures
                raise ValueError("judge_metrics: these rows hold images; pass the VLM judge's encoder")
            if encoder is not None and chunk[0].get("images") is not None:
                from rmspec.vision.judge import generate_with_images

                images = [r["images"] or [] for r in chunk]
                replies = generate_with_images(model, encoder, prompts, images, max_new_tokens, batch_size)
            else:
                batch = tokenizer.pad({"input_ids": list(prompts)}, return_tensors="pt").to(model.device)
                out = model.generate(
                    **batch, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
                )
                replies = [out[j, batch["input_ids"].shape[1] :].tolist() for j in range(len(chunk))]
            for j, target in enumerate(targets):
                text = tokenizer.decode(replies[j], skip_special_tokens=True)
                gold = parse_verdict(tokenizer.decode(target, skip_special_tokens=True), pattern)
                got = parse_verdict(text, pattern)
                parsed += got is not None
                if gold is not None:
                    labelled += 1
                    agreed += got == gold
                if len(examples) < 5:
                    examples.append({"generated": text, "verdict": got, "label": gold})
    finally:
        tokenizer.padding_side = side
    n = len(rows)
    return {
        "parse_rate": parsed / n if n else 0.0,
        "agreement": agreed / labelled if labelled else 0.0,
        "n": float(n),
    }


def final_metrics(trainer: Any, validation: Any, spec: Any, tokenizer: Any, main: bool) -> tuple[dict, dict]:
    """A judge's final evaluation: the LM loss on the validation split and, on the main process, the
    verdicts it writes for up to 200 of its rows (parse rate, agreement); no reward statistics."""
    from rmspec import approaches
    from rmspec.train.callbacks import rename

    if spec.approach.method == "grpo":  # held-out pairs judged in both orders (no LM loss: no target text)
        from rmspec.train.judge_grpo import final_metrics as grpo_metrics

        return grpo_metrics(trainer, validation, spec, tokenizer, main)
    family = approaches.of(spec).metric_family
    out = rename(trainer.evaluate(), family)
    if main:
        rows = [validation[i] for i in range(min(len(validation), 200))]
        model = trainer.accelerator.unwrap_model(trainer.model)
        judged = judge_metrics(
            model,
            tokenizer,
            rows,
            spec.approach.verdict_pattern,
            max_new_tokens=spec.approach.max_new_tokens,
            encoder=getattr(trainer.data_collator, "encoder", None),  # a VLM judge's (rmspec.vision.judge)
        )
        out.update({f"eval/{family}/{k}": v for k, v in judged.items()})
        trainer.log({f"eval_{k}": v for k, v in judged.items()})
    return out, {}
