"""Images in a data row: the one place that turns a row's image columns into checked references.

The data stage's row mapper (rmspec.data.presets.RowMapper) calls :meth:`RowImages.read` before it
maps a row: the row's image parts are checked and decoded (rmspec.vision.images), conversational
content parts become text with one ``<image>`` placeholder each (the canonical record's messages
hold text, so every later stage, filters, split, templates, reads them unchanged), and the images
become references the record carries in its ``images`` column:

- a file stays a path (absolute, so it resolves from the run directory as from the data's folder);
- bytes, an ``Image`` feature or a ``data:`` URI becomes a ``data:`` URI (its original bytes);
- an http(s) URL, where the spec allows downloads (``data.images.allow_urls``), is downloaded once
  here and becomes a ``data:`` URI of the bytes that came: training reads what was checked, and never
  downloads (nor finds a URL it may not fetch). Where downloads are off the row is rejected
  (``image_url_refused``), the detail naming the option.

A row whose image does not decode, or whose image parts and images differ in number, raises
:class:`ImageReject`; the mapper turns it into a reject with the reason and the row's ``file:line``.
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
    check_count,
    decode_image,
    downloaded,
    image_parts,
    images_of,
)

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
    placeholder: str = IMAGE_PLACEHOLDER
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
        prompt_col = columns.get("prompt")
        for field in TEXT_FIELDS:
            col = columns.get(field)
            if isinstance(col, str) and col in row:
                row[col] = flatten_parts(row[col], s.placeholder)
        counted = _counted_value(row, columns)
        if s.images_first and images and image_parts(counted, s.placeholder) == 0 and prompt_col in row:
            row[prompt_col] = _prepend(row[prompt_col], s.placeholder * len(images))
            counted = _counted_value(row, columns)
        check_count(counted, images, s.placeholder)
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


def _counted_value(row: dict[str, Any], columns: Mapping[str, Any]) -> Any:
    """The conversation whose image parts must match the images: the prompt (or, for whole
    conversations, the chosen side's, or the messages)."""
    for field in ("prompt", "messages", "chosen"):
        col = columns.get(field)
        if isinstance(col, str) and row.get(col) is not None:
            value = row[col]
            if field == "chosen" and not isinstance(value, list):
                continue
            return value
    return ""


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


def flatten_parts(value: Any, placeholder: str = IMAGE_PLACEHOLDER) -> Any:
    """Messages whose content is a list of parts become messages with text content: each image part
    one placeholder, text parts as they are, in order. Anything else is returned unchanged."""
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


def to_parts(text: str, placeholder: str = IMAGE_PLACEHOLDER) -> list[dict[str, str]]:
    """The inverse of :func:`flatten_parts` for one message: text -> content parts for a processor's
    chat template (``{"type": "image"}`` where each placeholder stood)."""
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
