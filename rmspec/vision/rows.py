"""Images in a data row: the one place that turns a row's image columns into checked references.

The data stage's row mapper (rmspec.data.presets.RowMapper) calls :meth:`RowImages.read` before it
maps a row: the row's image parts are checked and decoded (rmspec.vision.images), conversational
content parts become text with one picture mark each (rmspec.vision.marks.PICTURE: the canonical
record's messages hold text, so every later stage, filters, split, templates, reads them unchanged,
and the layout encodes each mark as an id no text encodes to), and the images become references the
record carries in its ``images`` column:

- a file stays a path (absolute, so it resolves from the run directory as from the data's folder);
- bytes, an ``Image`` feature or a ``data:`` URI becomes a ``data:`` URI (its original bytes);
- an http(s) URL, where the spec allows downloads (``data.images.allow_urls``), is downloaded once
  here and becomes a ``data:`` URI of the bytes that came: training reads what was checked, and never
  downloads (nor finds a URL it may not fetch). Where downloads are off the row is rejected
  (``image_url_refused``), the detail naming the option.

Where a row's pictures go (:func:`place_pictures`, the one rule, also `rmspec score`'s):

1. its prompt's image parts (``{"type": "image"}``, ``image_url``, ``input_image``), in order;
2. else, in a row that has images, each occurrence of the source's placeholder
   (``data.mapping.image_placeholder``, default ``<image>``: LLaVA-style data) in the prompt's text
   (a conversation's non-assistant turns);
3. else, with no placeholder in the prompt (or ``image_placeholder: null``), before the prompt's text.

Everything else is text: a ``<image>`` in a reply, in a row without images, or in a prompt whose
pictures are image parts is read as the characters it is. A row whose places and images differ in
number raises :class:`ImageReject` (``count_mismatch``), as does a U+FFFC already in its text
(``image_mark_in_text``); the mapper turns it into a reject with the reason and the row's ``file:line``.
"""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmspec.vision.images import (
    DEFAULT_DOWNLOAD_TIMEOUT,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PIXELS,
    IMAGE_PLACEHOLDER,
    ImageReject,
    decode_image,
    downloaded,
    images_of,
)
from rmspec.vision.marks import PICTURE, in_text

if TYPE_CHECKING:  # Pillow is imported where an image is decoded (rmspec.vision.images)
    from PIL import Image

    from rmspec.spec.data_images import ImagesSpec

#: The canonical fields whose values may hold conversational content parts.
TEXT_FIELDS = ("prompt", "chosen", "rejected", "messages", "response")


@dataclass(frozen=True)
class ImageSettings:
    base_dir: str | None = None  # the data file's folder: relative image paths resolve against it
    allow_urls: bool = False
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_bytes: int = DEFAULT_MAX_BYTES
    download_timeout: float = DEFAULT_DOWNLOAD_TIMEOUT
    # How the user can use a URL instead, named in a url_refused reject (`of` names the spec's option).
    allow_with: str = "download the images and give their paths"
    # The text that stands for a picture in this source's prompts (data.mapping.image_placeholder), None: none.
    placeholder: str | None = IMAGE_PLACEHOLDER
    images_first: bool = False  # a preset whose prompts name no image: the images go before the prompt text

    @classmethod
    def of(cls, options: ImagesSpec | None, **where: Any) -> ImageSettings:
        """The settings of the spec's data.images, for a dataset `where` says; None: the defaults, for rows
        read outside a training spec's data stage (a `pairs` benchmark file), where no option allows URLs."""
        if options is None:
            return cls(**where)
        return cls(
            allow_urls=options.allow_urls,
            max_pixels=options.max_pixels,
            max_bytes=options.max_bytes,
            download_timeout=options.download_timeout,
            allow_with="set data.images.allow_urls: true to download it, or download the images and give their paths",
            **where,
        )


@dataclass
class ImageInfo:
    """What the data report counts of one kept row's images."""

    sizes: list[tuple[int, int]]  # (width, height) per image


class RowImages:
    """Read, check and reference the images of one row (see the module docstring)."""

    def __init__(self, column: str, settings: ImageSettings):
        self.column = column
        self.settings = settings

    def read(self, row: dict[str, Any], columns: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], ImageInfo]:
        """(the row with content parts flattened to placeholders, the image references, their sizes)."""
        s = self.settings
        images = images_of(row.get(self.column))
        row = dict(row)
        for field in TEXT_FIELDS:
            col = columns.get(field)
            if isinstance(col, str) and col in row:
                if in_text(row[col]):
                    raise ImageReject(
                        "mark_in_text",
                        f"{col}: the text holds U+FFFC (OBJECT REPLACEMENT CHARACTER), which rmspec reserves for a "
                        "picture's place; remove it from the text",
                    )
                row[col] = flatten_parts(row[col])
        counted = next((f for f in ("prompt", "messages", "chosen") if _counted_column(row, columns, f)), None)
        if counted is not None:
            col = columns[counted]
            row[col] = place_pictures(row[col], len(images), s.placeholder, counted != "prompt", s.images_first)
            other = columns.get("rejected")
            if (
                counted == "chosen" and isinstance(other, str) and isinstance(row.get(other), list)
            ):  # its twin conversation
                row[other] = place_pictures(row[other], len(images), s.placeholder, True, s.images_first)
        elif images:
            raise ImageReject(
                "count_mismatch", f"the row gives {len(images)} image(s) but has no prompt to place them in"
            )
        refs, sizes = [], []
        for k, value in enumerate(images):
            try:
                value = downloaded(value, s.allow_urls, s.max_bytes, s.download_timeout)
                image = decode_image(value, s.base_dir, max_pixels=s.max_pixels, max_bytes=s.max_bytes)
            except ImageReject as exc:
                allow = f" ({s.allow_with})" if exc.reason == "url_refused" else ""
                raise ImageReject(exc.reason, f"{self.column}[{k}]: {exc.detail}{allow}") from None
            refs.append(reference(value, image, s.base_dir))
            sizes.append(image.size)
        return row, refs, ImageInfo(sizes)


def _counted_column(row: dict[str, Any], columns: Mapping[str, Any], field: str) -> bool:
    """Whether ``field`` is the conversation whose pictures are the row's: the prompt (or, for whole
    conversations, the messages, or the chosen side's when it is a conversation)."""
    col = columns.get(field)
    if not isinstance(col, str) or row.get(col) is None:
        return False
    if field == "chosen":
        return isinstance(row[col], list) and not _counted_column(row, columns, "prompt")
    if field == "messages":
        return not _counted_column(row, columns, "prompt")
    return True


def place_pictures(value: Any, n_images: int, placeholder: str | None, whole: bool = False, first: bool = False) -> Any:
    """The prompt (a text, or messages with text content: image parts already flattened to
    :data:`PICTURE`) with each of its ``n_images`` pictures' places written as :data:`PICTURE`, by the
    rule of the module docstring; raises ``count_mismatch`` where the places and the images differ.
    ``whole``: a whole conversation (the placeholder is read in its non-assistant turns only).
    ``first``: the source's rule puts pictures before a prompt that has no place for them (rlaif-v)."""
    parts = _count(value, PICTURE)
    if parts == 0 and n_images:
        found = _count(value, placeholder, whole) if placeholder else 0
        if found:
            if found != n_images:
                raise ImageReject(
                    "count_mismatch",
                    f"the prompt has 0 image part(s) and {found} {placeholder!r} placeholder(s) but the row gives "
                    f"{n_images} image(s) "
                    f"(data.mapping.image_placeholder reads {placeholder!r} as a picture's place; set it to null "
                    "to read it as text and put the images before the prompt)",
                )
            return _replace(value, placeholder, PICTURE, whole)  # type: ignore[arg-type]
        if first or placeholder is None:
            return _prepend(value, PICTURE * n_images)
        raise ImageReject(
            "count_mismatch",
            f"the prompt has 0 image part(s) and no {placeholder!r} placeholder but the row gives {n_images} image(s) "
            f"(mark each image with {{'type': 'image'}} or {placeholder!r}, or set data.mapping.image_placeholder: "
            "null to put the images before the prompt)",
        )
    if parts != n_images:
        raise ImageReject(
            "count_mismatch",
            f"the prompt has {parts} image part(s) but the row gives {n_images} image(s)"
            + (" (mark each image with {'type': 'image'})" if parts and parts < n_images else ""),
        )
    return value


def _texts(value: Any, whole: bool = False) -> list[str]:
    if isinstance(value, str):
        return [value]
    out = []
    for m in value if isinstance(value, list) else []:
        if (
            isinstance(m, Mapping)
            and isinstance(m.get("content"), str)
            and not (whole and m.get("role") == "assistant")
        ):
            out.append(m["content"])
    return out


def _count(value: Any, text: str, whole: bool = False) -> int:
    return sum(t.count(text) for t in _texts(value, whole))


def _replace(value: Any, old: str, new: str, whole: bool) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    out = []
    for m in value:
        if (
            isinstance(m, Mapping)
            and isinstance(m.get("content"), str)
            and not (whole and m.get("role") == "assistant")
        ):
            m = {**m, "content": m["content"].replace(old, new)}
        out.append(m)
    return out


def _prepend(value: Any, marks: str) -> Any:
    if isinstance(value, str):
        return marks + value
    if isinstance(value, list):
        out = [dict(m) if isinstance(m, Mapping) else m for m in value]
        for m in out:
            if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str):
                m["content"] = marks + m["content"]
                break
        return out
    return value


def flatten_parts(value: Any, placeholder: str = PICTURE) -> Any:
    """Messages whose content is a list of parts become messages with text content: each image part
    one picture mark (:data:`PICTURE`), text parts as they are, in order. Anything else is returned unchanged."""
    if not isinstance(value, list):
        return value
    out = []
    for message in value:
        if isinstance(message, Mapping) and isinstance(message.get("content"), list):
            pieces = []
            for part in message["content"]:
                if isinstance(part, Mapping) and part.get("type") in ("image", "image_url", "input_image"):
                    pieces.append(placeholder)
                elif isinstance(part, Mapping) and part.get("type") == "text":
                    pieces.append(str(part.get("text", "")))
                else:
                    pieces.append(str(part))
            message = {**message, "content": "".join(pieces)}
        out.append(message)
    return out


def to_parts(text: str, placeholder: str = PICTURE) -> list[dict[str, str]]:
    """The inverse of :func:`flatten_parts` for one message: text -> content parts for a processor's
    chat template (``{"type": "image"}`` where each picture mark stood)."""
    parts: list[dict[str, str]] = []
    pieces = text.split(placeholder)
    for k, piece in enumerate(pieces):
        if k:
            parts.append({"type": "image"})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def reference(value: Any, image: Image.Image, base_dir: str | os.PathLike[str] | None) -> str:
    """How a record refers to a checked image: its file's absolute path, or a data: URI."""
    if isinstance(value, Mapping) and not value.get("bytes") and value.get("path"):
        value = value["path"]
    if isinstance(value, str) and not value.startswith("data:"):
        path = Path(value[len("file://") :] if value.startswith("file://") else value)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        return str(path.resolve())
    if isinstance(value, str):
        return value  # a data: URI as given
    if isinstance(value, Mapping):
        value = value["bytes"]
    if isinstance(value, bytes | bytearray):
        return "data:image;base64," + base64.b64encode(bytes(value)).decode("ascii")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
