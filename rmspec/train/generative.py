"""Generative (SFT-based) judge: causal-LM loss on assistant tokens only; evaluation generates
the verdict and parses it with the spec's pattern."""

from __future__ import annotations

from typing import Any

import torch

from rmspec.train.base_trainer import MetricsTrainer


class GenerativeTrainer(MetricsTrainer):
    """The Trainer's own causal-LM loss (labels are -100 outside assistant turns, shifted inside
    the model, normalised over the tokens of the whole accumulated batch)."""

    loss_is_scaled_for_ga: bool | None = None  # back to the Trainer's own rule for model-computed losses

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
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
