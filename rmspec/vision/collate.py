"""Collators for VLM reward models: TRL's RewardTrainer has no image handling, so rmspec has its own.

The data stage tokenized each row with the chat template, its images standing as ``<image>``
placeholders (rmspec.vision.rows). Here the ids are decoded back to text (byte-level tokenizers
decode losslessly), each placeholder becomes the model's image part, and the processor expands it
into the image's visual tokens and computes ``pixel_values`` / ``image_grid_thw`` /
``mm_token_type_ids``. Truncation and the chat template stay the data stage's.

Pairs are stacked chosen rows then rejected rows, as rmspec.train.collators.PairCollator does, so
the trainers read them unchanged; each side carries its own copy of the row's images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rmspec.vision.images import decode_image
from rmspec.vision.processor import expand_placeholders

#: The batch keys a VLM forward takes besides input_ids and attention_mask: Qwen2-VL's grids and token types,
#: Gemma 3's token types (its image tokens attend both ways), Idefics3 / SmolVLM's tile masks,
#: LLaVA-OneVision's image sizes and images per row.
VISION_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "mm_token_type_ids",
    "token_type_ids",
    "pixel_attention_mask",
    "image_sizes",
    "batch_num_images",
)


def vision_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The image inputs of a batch ({} for text: a text model's segment ids alone are no image input)."""
    found = {k: inputs[k] for k in VISION_KEYS if k in inputs}
    return found if set(found) - {"token_type_ids"} else {}


def has_images(dataset: Any) -> bool:
    return dataset is not None and "images" in dataset.column_names


@dataclass
class VisionEncoder:
    processor: Any
    image_part: str

    def __call__(self, ids: list[list[int]], images: list[list[str]]) -> dict[str, torch.Tensor]:
        tokenizer = self.processor.tokenizer
        texts = [expand_placeholders(tokenizer.decode(row, skip_special_tokens=False), self.image_part) for row in ids]
        # One list per row (the processors' convention): SmolVLM reads a flat list as one row's images.
        nested = [[decode_image(ref) for ref in refs] for refs in images]
        encoded = self.processor(
            text=texts, images=nested if any(nested) else None, padding=True, padding_side="right", return_tensors="pt"
        )
        return dict(encoded)


@dataclass
class VisionPairCollator:
    """Bradley-Terry batches with images: input_ids [2B, T] (chosen rows, then rejected rows)."""

    encoder: VisionEncoder

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        ids = [r["chosen_input_ids"] for r in rows] + [r["rejected_input_ids"] for r in rows]
        images = [r["images"] or [] for r in rows] * 2
        batch = self.encoder(ids, images)
        batch["margin"] = torch.tensor([float(r.get("margin") or 0.0) for r in rows], dtype=torch.float32)
        if rows and "tie" in rows[0]:
            batch["tie"] = torch.tensor([bool(r["tie"]) for r in rows], dtype=torch.bool)
        return batch


@dataclass
class VisionScoresCollator:
    """Pointwise batches with images: input_ids [B, T], scores [B, attributes] (NaN where unscored)."""

    encoder: VisionEncoder

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.encoder([r["input_ids"] for r in rows], [r["images"] or [] for r in rows])
        batch["scores"] = torch.tensor(
            [[float("nan") if v is None else float(v) for v in r["scores"]] for r in rows], dtype=torch.float32
        )
        return batch
