"""A vision-language judge's batches: the generative approach (method: sft) with images, as
LLaVA-Critic trains its judge.

The data stage tokenized each conversation with the chat template, the prompt's images standing as
picture ids in the user turn (rmspec.vision.marks) and the labels -100 everywhere but the assistant's
reply (the verdict). Training and judging read the same ids:

- :class:`VisionLMCollator` (training): each row is cut where its labels start. The part before
  (the judge prompt with its pictures' places) goes through rmspec.vision.collate.VisionEncoder, which
  splices the processor's expansion of the model's image part into each place: the image's visual tokens (``pixel_values``, ``image_grid_thw``, ``mm_token_type_ids``); the part
  from the labels on (the verdict) keeps the data stage's ids and labels unchanged. The labels
  therefore cover the verdict only, whatever number of visual tokens the images add.
- :func:`generate_with_images` (validation, evaluation, `rmspec score`): the judge prompt's ids are
  expanded the same way, padded on the left, and the model generates from the right edge.

Images belong to the prompt: a picture's place in or after the reply is refused (nothing would feed it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rmspec.vision.collate import TOKEN_KEYS, VisionEncoder
from rmspec.vision.marks import count


def pad_right(rows: Sequence[Sequence[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows padded on the right with value, attention mask), as rmspec.inference.padding pads text
    (vision sits below inference: the same rule, in four lines)."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
        mask[i, : len(r)] = 1
    return out, mask


def _shaped(value: Any, shape: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.shape == shape


def split_at_labels(ids: Sequence[int], labels: Sequence[int]) -> int:
    """Where a row's labelled part starts (its length when nothing is labelled)."""
    return next((k for k, label in enumerate(labels) if label != -100), len(ids))


@dataclass
class VisionLMCollator:
    """Generative (SFT) batches with images: input_ids / attention_mask / mm_token_type_ids [B, T]
    (right padding), labels [B, T] (-100 but on the data stage's labelled tokens), pixel_values and
    image_grid_thw of every row's images in order."""

    encoder: VisionEncoder

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        tokenizer = self.encoder.processor.tokenizer
        cuts = [split_at_labels(r["input_ids"], r["labels"]) for r in rows]
        for r, cut in zip(rows, cuts):
            if count(r["input_ids"][cut:]):
                raise ValueError(
                    f"row {r.get('id', '?')}: a picture's place lies in or after the judge's reply; "
                    "a judge reads images in the prompt (the user turn) only"
                )
        prompts = self.encoder([r["input_ids"][:cut] for r, cut in zip(rows, cuts)], [r["images"] or [] for r in rows])
        width = prompts["input_ids"].shape
        # per-token keys besides the ids (Qwen2-VL's mm_token_type_ids): the reply's tokens are text (0)
        per_token = [k for k in TOKEN_KEYS if k in prompts and _shaped(prompts[k], width)]
        lengths = prompts["attention_mask"].sum(dim=1).tolist()
        ids, labels = [], []
        extra: dict[str, list[list[int]]] = {k: [] for k in per_token}
        for k, (r, cut, n) in enumerate(zip(rows, cuts, lengths)):
            tail = list(r["input_ids"][cut:])
            ids.append(prompts["input_ids"][k, :n].tolist() + tail)
            labels.append([-100] * n + list(r["labels"][cut:]))
            for key in per_token:
                extra[key].append(prompts[key][k, :n].tolist() + [0] * len(tail))
        input_ids, mask = pad_right(ids, tokenizer.pad_token_id)
        batch: dict[str, torch.Tensor] = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "labels": pad_right(labels, -100)[0],
        }
        batch.update({k: pad_right(v, 0)[0] for k, v in extra.items()})
        # the image side as the processor gave it (pixel_values, image_grid_thw, ...): rows' images in order
        batch.update({k: v for k, v in prompts.items() if k not in batch and k not in ("input_ids", "attention_mask")})
        return batch


def left_padded(encoder: VisionEncoder, prompts: Sequence[Sequence[int]], images: Sequence[Sequence[Any]]) -> Any:
    """The encoder's batch of judge prompts (ids with their pictures' places) and their images, padded on
    the left so that generation continues every row from the right edge."""
    batch = encoder([list(p) for p in prompts], [list(i) for i in images])
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    width = batch["input_ids"].shape[1]
    pad = {"input_ids": encoder.processor.tokenizer.pad_token_id}
    for key, value in list(batch.items()):
        if key in ("input_ids", "attention_mask", *TOKEN_KEYS) and _shaped(value, batch["input_ids"].shape):
            out = torch.full_like(value, pad.get(key, 0))
            for row, n in enumerate(lengths):
                out[row, width - n :] = value[row, :n]
            batch[key] = out
    return batch


def generate_with_images(
    model: Any,
    encoder: VisionEncoder,
    prompts: Sequence[Sequence[int]],
    images: Sequence[Sequence[Any]],
    max_new_tokens: int,
    batch_size: int = 8,
) -> list[list[int]]:
    """The generated ids of each greedy continuation of a judge prompt read with its images
    (batched by length, as rmspec.inference.judge.generate_ids batches text prompts)."""
    pad = encoder.processor.tokenizer.pad_token_id
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[list[int]] = [[] for _ in prompts]
    device = next(model.parameters()).device
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch = left_padded(encoder, [prompts[i] for i in chunk], [images[i] for i in chunk])
            width = batch["input_ids"].shape[1]
            generated = model.generate(
                **{k: v.to(device) for k, v in batch.items()},
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad,
            )
            for row, i in enumerate(chunk):
                out[i] = generated[row, width:].tolist()
    return out


def card_use(config: Any) -> tuple[str, ...] | None:
    """The model card's Use section for a VLM judge (None for a text judge: the judge kind's own)."""
    if getattr(config, "vision_config", None) is None:
        return None
    return (
        "A vision-language judge: its `*ForConditionalGeneration` writes a verdict (`config.rmspec.verdict_pattern`",
        "reads it) on a judge prompt whose user turn holds the prompt's images. Load it in plain transformers:",
        "",
        "```python",
        "from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer",
        "model = AutoModelForImageTextToText.from_pretrained(PATH)",
        "tokenizer = AutoTokenizer.from_pretrained(PATH)",
        "image_processor = AutoImageProcessor.from_pretrained(PATH)  # AutoProcessor too, where torchvision is installed",
        "```",
        "",
        "```bash",
        "rmspec score PATH pairs.jsonl    # prompt / chosen / rejected rows with an images column: the verdict",
        "```",
    )
