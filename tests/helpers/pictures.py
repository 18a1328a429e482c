"""Ids as the data stage writes a row with pictures: each picture's place the one id PICTURE_ID
(rmspec.vision.marks), the text around it encoded on its own."""

from __future__ import annotations

from typing import Any

from rmspec.vision.marks import PICTURE_ID


def marked_ids(tokenizer: Any, text: str, placeholder: str = "<image>") -> list[int]:
    """``text``'s ids with each ``placeholder`` a picture's place (PICTURE_ID)."""
    ids: list[int] = []
    for k, piece in enumerate(text.split(placeholder)):
        ids += ([PICTURE_ID] if k else []) + (tokenizer(piece, add_special_tokens=False)["input_ids"] if piece else [])
    return ids
