"""Where a picture stands in a row: a mark that text cannot forge (light: no torch, no Pillow).

A row's pictures come from its messages' image parts (``{"type": "image"}``, OpenAI ``image_url``)
or, for a source whose format writes them as text placeholders (LLaVA-style ``<image>``), from the
rule rmspec.vision.rows reads them with. Either way each picture becomes :data:`PICTURE` in the
canonical record's text (U+FFFC, Unicode's OBJECT REPLACEMENT CHARACTER), and the data pipeline's
layout (rmspec.data.layout, built with ``pictures=True``) encodes each :data:`PICTURE` as the id
:data:`PICTURE_ID`, which no tokenizer gives any text: from there on a picture's place is an id,
and the collator (rmspec.vision.collate) splices the picture's visual tokens there without ever
decoding the ids back to text. A literal ``<image>`` (or ``<|image_pad|>``) in a message is text.

A U+FFFC already in a row's text would forge a picture: the data stage rejects such a row
(``image_mark_in_text``) and a served request gets a 400 naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The character a picture's place is written as in a canonical record's text.
PICTURE = "\ufffc"
#: The id a picture's place is encoded as (negative: no tokenizer's vocabulary holds it, so no text
#: encodes to it, and a model that is handed it unspliced fails at once rather than reading a wrong token).
PICTURE_ID = -1


#: The image tokens of the families rmspec reads (a processor expands them into visual tokens): written
#: in a message's text they are text, so the layout encodes them as their characters (:func:`image_tokens_of`).
IMAGE_TOKENS = (
    "<image>",
    "<|image_pad|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|video_pad|>",
    "<video>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
    "<fake_token_around_image>",
    "<global-img>",
)


def image_tokens_of(tokenizer: Any) -> list[str]:
    """The image tokens this tokenizer reads as one special id (its added tokens among :data:`IMAGE_TOKENS`,
    and Idefics3's ``<row_i_col_j>``), longest first."""
    try:
        added = set(tokenizer.get_added_vocab())
    except Exception:  # a tokenizer without added tokens
        return []
    found = [t for t in added if t in IMAGE_TOKENS or (t.startswith("<row_") and "_col_" in t)]
    return sorted(found, key=len, reverse=True)


def count(ids: Sequence[int]) -> int:
    """How many pictures a sequence of ids holds."""
    return sum(1 for i in ids if i == PICTURE_ID)


def decode(tokenizer: Any, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    """The text of ``ids``, each picture's place written as :data:`PICTURE` (for reports and previews)."""
    pieces: list[str] = []
    run: list[int] = []
    for i in ids:
        if i == PICTURE_ID:
            pieces.append(tokenizer.decode(run, skip_special_tokens=skip_special_tokens) if run else "")
            pieces.append(PICTURE)
            run = []
        else:
            run.append(i)
    pieces.append(tokenizer.decode(run, skip_special_tokens=skip_special_tokens) if run else "")
    return "".join(pieces)


def in_text(value: Any) -> bool:
    """Whether a text or a conversation (its messages' text content, text parts included) holds :data:`PICTURE`."""
    if isinstance(value, str):
        return PICTURE in value
    if isinstance(value, list):
        return any(in_text(v) for v in value)
    if isinstance(value, dict):
        if value.get("type") not in (None, "text"):
            return False
        return in_text(value.get("content")) or in_text(value.get("text"))
    return False
