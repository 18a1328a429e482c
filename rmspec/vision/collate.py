"""Collators for VLM reward models: TRL's RewardTrainer has no image handling, so rmspec has its own.

The data stage tokenized each row with the chat template, each picture's place the one id
rmspec.vision.marks.PICTURE_ID (no text encodes to it: a literal ``<image>`` in a message stays the
text it is). Here each row's ids are read as they are, never decoded back to text: the processor
expands only the model's image part (``<|vision_start|><|image_pad|><|vision_end|>``, ``<image>``, ...)
with the row's images, which gives each picture's visual tokens (and ``pixel_values`` /
``image_grid_thw`` / ``mm_token_type_ids``), and those ids are spliced in where the picture stood.
Truncation and the chat template stay the data stage's.

Pairs are stacked chosen rows then rejected rows, as rmspec.train.collators.PairCollator does, so
the trainers read them unchanged; each side carries its own copy of the row's images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rmspec.vision.images import decode_image
from rmspec.vision.marks import PICTURE_ID

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


#: The per-token keys a processor gives beside input_ids (a value per position; 0 on text), by name: a
#: picture key can have the ids' shape by chance (one row, one picture of one visual token: image_grid_thw).
TOKEN_KEYS = ("mm_token_type_ids", "token_type_ids")


def vision_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The image inputs of a batch ({} for text: a text model's segment ids alone are no image input)."""
    found = {k: inputs[k] for k in VISION_KEYS if k in inputs}
    return found if set(found) - {"token_type_ids"} else {}


def has_images(dataset: Any) -> bool:
    return dataset is not None and "images" in dataset.column_names


@dataclass
class VisionEncoder:
    """Rows of ids (each picture's place a PICTURE_ID) and their images -> the model's batch (right padding)."""

    processor: Any
    image_part: str

    def __call__(self, ids: list[list[int]], images: list[list[str]]) -> dict[str, torch.Tensor]:
        tokenizer = self.processor.tokenizer
        used = []
        for k, row in enumerate(ids):
            places = sum(1 for i in row if i == PICTURE_ID)
            if places != len(images[k] or []):  # the data stage and the scorers give every picture its place
                raise ValueError(f"row {k}: {places} picture place(s) but {len(images[k] or [])} image(s)")
            used.append(list(images[k] or []))
        expanded, pictures = self.expand(used)
        per_token = sorted(
            ({key for rows in expanded.values() for piece in rows for key in piece} | self.text_keys()) - {"input_ids"}
        )
        rows: list[dict[str, list[int]]] = []
        for k, row in enumerate(ids):
            out: dict[str, list[int]] = {key: [] for key in ("input_ids", *per_token)}
            start, n = 0, 0
            for j in [*(j for j, i in enumerate(row) if i == PICTURE_ID), len(row)]:
                out["input_ids"] += row[start:j]
                for key in per_token:
                    out[key] += [0] * (j - start)
                if j < len(row):
                    piece = expanded[k][n]
                    for key in ("input_ids", *per_token):
                        out[key] += piece.get(key, [0] * len(piece["input_ids"]))
                    n += 1
                start = j + 1
            rows.append(out)
        width = max((len(r["input_ids"]) for r in rows), default=0)
        batch: dict[str, torch.Tensor] = {}
        pad = {"input_ids": tokenizer.pad_token_id}
        for key in ("input_ids", *per_token):
            batch[key] = torch.tensor(
                [r[key] + [pad.get(key, 0)] * (width - len(r[key])) for r in rows], dtype=torch.long
            )
        batch["attention_mask"] = torch.tensor(
            [[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rows]
        )
        batch.update(pictures)
        return batch

    def expand(self, used: list[list[str]]) -> tuple[dict[int, list[dict[str, list[int]]]], dict[str, Any]]:
        """(per row: each picture's ids and per-token values as the processor expands the image part with it,
        the pictures' tensors: pixel_values, image_grid_thw, ... of the rows' images in order). One processor
        call over the rows that have pictures: each row's text is its image parts joined by the pad token
        (its own id, in no expansion), so the pieces split back per picture."""
        rows = [k for k, u in enumerate(used) if u]
        if not rows:
            return {}, {}
        tokenizer = self.processor.tokenizer
        sep, sep_id = tokenizer.pad_token, tokenizer.pad_token_id
        # One list per row (the processors' convention): SmolVLM reads a flat list as one row's images.
        nested = [[decode_image(ref) for ref in used[k]] for k in rows]
        out = self.processor(
            text=[sep.join([self.image_part] * len(used[k])) for k in rows],
            images=nested,
            padding=True,
            padding_side="right",
            return_tensors="pt",
            add_special_tokens=False,
        )
        shape = out["input_ids"].shape
        per_token = [key for key in TOKEN_KEYS if key in out and out[key].shape == shape]
        expanded: dict[int, list[dict[str, list[int]]]] = {}
        for j, k in enumerate(rows):
            length = int(out["attention_mask"][j].sum())
            row_ids = out["input_ids"][j, :length].tolist()
            cuts = [-1, *(p for p, i in enumerate(row_ids) if i == sep_id), length]
            if len(cuts) - 1 != len(used[k]):
                raise ValueError(
                    f"the processor's expansion of {len(used[k])} image part(s) holds {len(cuts) - 2} pad token(s) "
                    "where rmspec expects one between pictures"
                )
            expanded[k] = [
                {key: out[key][j, a + 1 : b].tolist() for key in ("input_ids", *per_token)}
                for a, b in zip(cuts, cuts[1:])
            ]
        pictures = {key: value for key, value in out.items() if key not in ("input_ids", "attention_mask", *per_token)}
        return expanded, pictures

    def text_keys(self) -> set[str]:
        """The per-token keys the processor gives a text without pictures (Qwen2-VL's mm_token_type_ids): a
        batch has them whether or not it holds a picture."""
        if not hasattr(self, "_text_keys"):
            out = self.processor(text=["x"], return_tensors="pt", add_special_tokens=False)
            shape = out["input_ids"].shape
            self._text_keys = {key for key in TOKEN_KEYS if key in out and out[key].shape == shape}
        return self._text_keys


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
