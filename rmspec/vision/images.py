"""Decode and check one image of a data row, a score file or a request.

Every stage that takes images (the data stage, ``rmspec score``, ``rmspec serve``) goes through
:func:`decode_image`, so an image is refused for the same reason, with the same code, wherever it
arrives. A refusal is an :class:`ImageReject` carrying a short ``reason`` code (the data stage's
rejects.jsonl reason, the data report's counter, serve's 400/413) and a ``detail`` naming the item.

Accepted forms of one image:

- a path, relative to ``base_dir`` (the data file's folder) unless absolute; ``file://`` too;
- a ``data:image/...;base64,...`` URI;
- raw bytes;
- a ``datasets`` ``Image`` feature value: ``{"bytes": ..., "path": ...}`` (bytes win when present);
- an already decoded ``PIL.Image.Image`` (``datasets`` decodes its Image feature by default);
- an ``http(s)://`` URL only when the user allows downloads (``allow_urls``: the spec's
  ``data.images.allow_urls``, ``rmspec score`` / ``serve --allow-image-urls``), else ``url_refused``;
  a download that fails (an HTTP error status, its total deadline, a refused connection) is
  ``download_failed``, one over the byte limit ``too_many_bytes`` (read no further than the limit),
  one a server's address guard refuses (rmspec.vision.fetch) ``url_refused``; the bytes that came
  are then checked as a file's are. :func:`downloaded` fetches a URL once into bytes, so the data
  stage keeps what it checked and no later stage downloads again.

The byte limit holds for every form alike (a file's size, a data: URI's decoded length and a
download's body, each known before the bytes are read or decoded); the pixel limit is read from
the header (:func:`open_image`) before any pixel is decoded; only the decoders of :data:`FORMATS`
ever see the bytes, whatever type a data: URI or a server declares. A caller that budgets several
images (``rmspec serve``: rmspec.serve.images) reads every header first and decodes after
(:func:`load_image`).

The image is fully decoded here (``load()``), so a truncated file is caught once, in the data
stage, and not by a training step hours later. Pillow is the only dependency: no torch.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmspec.errors import RmspecError

if TYPE_CHECKING:
    from PIL import Image

    from rmspec.vision.fetch import Guard

# Pillow (extra `vision`) is imported where an image is decoded, not here: the data stage imports this
# module for every spec, and `rmspec validate` must run on the base install, which has no Pillow.

#: Reason codes, in the order the data report lists them.
REASONS = (
    "missing",
    "undecodable",
    "truncated",
    "zero_size",
    "too_many_pixels",
    "too_many_bytes",
    "url_refused",
    "download_failed",
    "count_mismatch",
    "processor_refused",  # the model's processor cannot read it (Qwen2-VL: aspect ratio over 200): rmspec.vision.tokens
    "mark_in_text",  # the text holds U+FFFC, a picture's place (rmspec.vision.marks)
)

#: Defaults: 64 megapixels (a 8k x 8k picture) and 32 MiB of encoded bytes per image. Pillow's own
#: decompression-bomb guard (89 megapixels, warning only) is replaced by this explicit limit.
DEFAULT_MAX_PIXELS = 64_000_000
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
#: Seconds one download may take in all, connecting to the last byte (rmspec.vision.fetch's deadline).
DEFAULT_DOWNLOAD_TIMEOUT = 30.0
URL_SCHEMES = ("http://", "https://")
#: The image formats decoded (Pillow's names), wherever an image comes from; any other is
#: ``undecodable`` whatever type it declares (EPS would run Ghostscript, and every extra decoder is
#: more code an untrusted file reaches).
FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")
FORMAT_NAMES = "PNG, JPEG, WebP, GIF or BMP"

#: The placeholder that marks an image in a plain-text prompt (the Hugging Face convention).
IMAGE_PLACEHOLDER = "<image>"


class ImageReject(Exception):
    """One image that cannot be used: ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str):
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def decode_image(
    value: Any,
    base_dir: str | os.PathLike[str] | None = None,
    allow_urls: bool = False,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    download_timeout: float = DEFAULT_DOWNLOAD_TIMEOUT,
    guard: Guard | None = None,
) -> Image.Image:
    """Return ``value`` as a fully decoded RGB image, or raise :class:`ImageReject`."""
    Image = _pillow()
    if isinstance(value, Image.Image):
        return _checked(value, "the decoded image", max_pixels)
    data, name = encoded_image(value, base_dir, allow_urls, max_bytes, download_timeout, guard)
    return load_image(open_image(data, name, max_pixels), name)


def png_data_uri(image: Image.Image) -> str:
    """A decoded picture as a ``data:image/png;base64,`` URI: PNG is lossless, so whoever decodes it (vLLM, from
    an ``image_url`` part) reads the very pixels rmspec decoded. zlib level 1: the same pixels, encoded 1.1 to 4.2x
    faster than at Pillow's default level 6 (70 to 1024 px photo-like pictures; bench/results/picture_forwarding.md)."""
    if "transparency" in image.info:  # a palette's transparent index, carried by convert("RGB") as a colour: Pillow
        image = image.copy()  # would write it as a tRNS chunk, and vLLM would paint that colour white
        del image.info["transparency"]
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


#: The ``info`` key under which a decoded picture keeps its own bytes as a ``data:`` URI (:func:`keep_source`).
SOURCE_URI = "rmspec_source_uri"
#: Formats whose bytes decode to the same pixels under any Pillow (lossless PNG; JPEG and WebP through the same
#: libjpeg-turbo and libwebp decoders). GIF and BMP pictures are re-encoded.
SOURCE_FORMATS = ("PNG", "JPEG", "WEBP")
_EXIF_ORIENTATION = 0x0112


def stored_differently(image: Image.Image) -> tuple[str, ...]:
    """What of an opened picture rmspec reads as stored where vLLM (and, for the rotation, transformers'
    ``load_image``) would read other pixels: ``exif_rotation`` (they apply it, rmspec does not) and
    ``transparency`` (rmspec drops the alpha and keeps the colours under it; vLLM paints those pixels white)."""
    reasons = []
    if image.getexif().get(_EXIF_ORIENTATION, 1) != 1:
        reasons.append("exif_rotation")
    if "A" in image.getbands() or "transparency" in image.info:
        reasons.append("transparency")
    return tuple(reasons)


def keep_source(opened: Image.Image, decoded: Image.Image, data: bytes) -> Image.Image:
    """``decoded`` (:func:`load_image` of ``opened``, read from ``data``), keeping ``data`` as a data: URI where a
    reader that decodes it as vLLM does (EXIF orientation applied, transparency composited on white, then RGB)
    gets the pixels rmspec decoded (which applies neither): a PNG, JPEG or WebP in RGB or greyscale with no
    transparency and no EXIF rotation. Sending those bytes on (:func:`sendable_uri`) skips a PNG encoding that
    cost 0.4 to 250 ms a picture (70 to 1024 px; bench/results/picture_forwarding.md); any other picture is sent as
    a PNG of rmspec's pixels."""
    if opened.format in SOURCE_FORMATS and opened.mode in ("RGB", "L") and not stored_differently(opened):
        assert opened.format is not None
        kind = opened.format.lower()
        decoded.info[SOURCE_URI] = f"data:image/{kind};base64," + base64.b64encode(data).decode("ascii")
    return decoded


def sendable_uri(image: Image.Image) -> str:
    """A decoded picture as a data: URI for a server that decodes it again (vLLM): its own bytes where
    :func:`keep_source` kept them, else a PNG of its pixels. Either way the server reads rmspec's pixels."""
    return image.info.get(SOURCE_URI) or png_data_uri(image)


def encoded_image(
    value: Any,
    base_dir: str | os.PathLike[str] | None = None,
    allow_urls: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    download_timeout: float = DEFAULT_DOWNLOAD_TIMEOUT,
    guard: Guard | None = None,
) -> tuple[bytes, str]:
    """(the encoded bytes, a name for messages) of an image value that is not decoded yet, within
    ``max_bytes`` (a data: URI's size is known from its length, before its base64 is decoded)."""
    value = downloaded(value, allow_urls, max_bytes, download_timeout, guard)
    return _encoded_bytes(value, base_dir, max_bytes)


def downloaded(
    value: Any,
    allow_urls: bool,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float = DEFAULT_DOWNLOAD_TIMEOUT,
    guard: Guard | None = None,
) -> Any:
    """An ``http(s)`` URL as the image feature value ``{"bytes": <what came>, "path": <the URL>}``
    (decoded and named as any such value); any other value unchanged. Raises ``url_refused`` unless
    ``allow_urls`` (or where ``guard`` refuses its address), ``download_failed`` or ``too_many_bytes``.
    ``timeout`` is the download's total deadline (rmspec.vision.fetch)."""
    if isinstance(value, Mapping) and not value.get("bytes") and value.get("path"):
        value = str(value["path"])  # an image feature that names its file by URL only
    if not (isinstance(value, str) and value.strip().startswith(URL_SCHEMES)):
        return value
    url = value.strip()
    if not allow_urls:
        raise ImageReject("url_refused", f"{url}: downloading images is off")
    return {"bytes": _download(url, max_bytes, timeout, guard), "path": url}


def describe(value: Any) -> str:
    """A short name of an image value for messages (never its whole bytes)."""
    if isinstance(value, str):
        return value if len(value) <= 80 or not value.startswith("data:") else value[:40] + "..."
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        if value.get("path"):
            return str(value["path"])
        return f"<image feature, {len(value.get('bytes') or b'')} bytes>"
    if hasattr(value, "width") and hasattr(value, "height") and hasattr(value, "mode"):  # a decoded PIL image
        return f"<decoded image {value.width}x{value.height}>"
    return f"<{type(value).__name__}>"


def _encoded_bytes(value: Any, base_dir: str | os.PathLike[str] | None, max_bytes: int) -> tuple[bytes, str]:
    if value is None:
        raise ImageReject("missing", "the image is null")
    if isinstance(value, bytes | bytearray):
        return _limited(bytes(value), f"<{len(value)} bytes>", max_bytes), f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        raw = value.get("bytes")
        if raw:  # named by its path (a download: its URL) where it has one
            name = str(value.get("path") or f"<{len(raw)} bytes>")
            return _limited(bytes(raw), name, max_bytes), name
        if value.get("path"):
            return _encoded_bytes(str(value["path"]), base_dir, max_bytes)
        raise ImageReject("missing", "the image feature has neither bytes nor a path")
    if not isinstance(value, str):
        raise ImageReject("undecodable", f"an image must be a path, a data: URI or bytes, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise ImageReject("missing", "the image path is empty")
    if text.startswith("data:"):
        return _limited(_data_uri_bytes(text, max_bytes), describe(text), max_bytes), describe(text)
    if text.startswith("file://"):
        text = text[len("file://") :]
    path = Path(text)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    if not path.is_file():
        raise ImageReject("missing", f"{text}: no such file (paths are relative to the data file's folder)")
    size = path.stat().st_size
    if size > max_bytes:
        raise ImageReject("too_many_bytes", f"{text}: {size} bytes, over the limit of {max_bytes}")
    return path.read_bytes(), text


def _data_uri_bytes(text: str, max_bytes: int) -> bytes:
    head, sep, payload = text.partition(",")
    if not sep or ";base64" not in head:
        raise ImageReject("undecodable", f"{describe(text)}: a data: URI must be data:image/...;base64,<data>")
    size = len(payload) // 4 * 3 - payload[-2:].count("=")  # what it decodes to, known before decoding it
    if size > max_bytes:
        raise ImageReject("too_many_bytes", f"{describe(text)}: {size} bytes, over the limit of {max_bytes}")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageReject("undecodable", f"{describe(text)}: its base64 payload does not decode ({exc})") from None


def _download(url: str, max_bytes: int, timeout: float, guard: Guard | None) -> bytes:
    """The body of a successful GET of ``url`` (rmspec.vision.fetch), at most ``max_bytes`` of it."""
    from rmspec.vision.fetch import FetchFailed, FetchRefused, TooLarge, fetch

    try:
        data = fetch(url, max_bytes=max_bytes, timeout=timeout, guard=guard)
    except FetchRefused as exc:
        raise ImageReject("url_refused", f"{url}: {exc}") from None
    except FetchFailed as exc:
        raise ImageReject("download_failed", f"{url}: {exc}") from None
    except TooLarge as exc:
        raise ImageReject("too_many_bytes", f"{url}: {exc}") from None
    return _limited(data, url, max_bytes)


def _limited(data: bytes, name: str, max_bytes: int) -> bytes:
    if len(data) > max_bytes:
        raise ImageReject("too_many_bytes", f"{name}: over the limit of {max_bytes} bytes")
    return data


def _pillow() -> Any:
    """PIL.Image, or a located install hint when the `vision` extra is missing."""
    try:
        from PIL import Image
    except ImportError:
        raise RmspecError("images need Pillow, which is not installed", hint="pip install 'rmspec[vision]'") from None
    # Pillow warns (not raises) between its own limit and twice it; our pixel limit decides instead.
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    return Image


def open_image(data: bytes, name: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """The image's header read (no pixel decoded yet) by the decoders of :data:`FORMATS` only,
    its size checked: what a caller needs to budget pixels before any is decoded."""
    Image = _pillow()
    from PIL import UnidentifiedImageError

    if not data:
        raise ImageReject("zero_size", f"{name}: the image has 0 bytes")
    try:
        # Only the allowed decoders look at the bytes, whatever type a data: URI or a server declares.
        image = Image.open(io.BytesIO(data), formats=FORMATS)
    except Image.DecompressionBombError as exc:
        raise ImageReject("too_many_pixels", f"{name}: {exc}") from None
    except UnidentifiedImageError:
        raise ImageReject(
            "undecodable", f"{name}: not a {FORMAT_NAMES} image (the formats read; a declared type does not count)"
        ) from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageReject("undecodable", f"{name}: not an image Pillow can read ({exc})") from None
    _check_size(image.width, image.height, name, max_pixels)
    return image


def load_image(image: Image.Image, name: str) -> Image.Image:
    """An image from :func:`open_image`, fully decoded (a truncated file is caught here), as RGB."""
    Image = _pillow()
    try:
        image.load()
    except Image.DecompressionBombError as exc:
        raise ImageReject("too_many_pixels", f"{name}: {exc}") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        reason = "truncated" if "truncat" in str(exc).lower() or isinstance(exc, EOFError) else "undecodable"
        raise ImageReject(reason, f"{name}: {exc}") from None
    return image.convert("RGB") if image.mode != "RGB" else image


def _checked(image: Image.Image, name: str, max_pixels: int) -> Image.Image:
    if image.format is not None and image.format not in FORMATS:  # decoded elsewhere (datasets' Image feature)
        raise ImageReject("undecodable", f"{name}: a {image.format} image; rmspec reads {FORMAT_NAMES} only")
    _check_size(image.width, image.height, name, max_pixels)
    return image.convert("RGB") if image.mode != "RGB" else image


def _check_size(width: int, height: int, name: str, max_pixels: int) -> None:
    if width <= 0 or height <= 0:
        raise ImageReject("zero_size", f"{name}: {width}x{height} pixels")
    if width * height > max_pixels:
        raise ImageReject(
            "too_many_pixels", f"{name}: {width}x{height} = {width * height} pixels, over the limit of {max_pixels}"
        )


def image_parts(prompt: Any, placeholder: str = IMAGE_PLACEHOLDER) -> int:
    """How many images a prompt asks for.

    A conversation (a list of messages) counts its ``{"type": "image"}`` content parts (also
    ``image_url`` and ``input_image``, the OpenAI spellings); a plain string counts ``placeholder``.
    """
    if isinstance(prompt, str):
        return prompt.count(placeholder)
    if isinstance(prompt, Mapping):
        prompt = [prompt]
    count = 0
    if isinstance(prompt, list):
        for message in prompt:
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, str):
                count += content.count(placeholder)
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, Mapping) and part.get("type") in ("image", "image_url", "input_image"):
                        count += 1
    return count


def images_of(value: Any) -> list[Any]:
    """A row's ``images`` value as a list: one image alone, a list, or nothing (``None``)."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def check_count(prompt: Any, images: list[Any], placeholder: str = IMAGE_PLACEHOLDER) -> None:
    """Raise ``count_mismatch`` when the prompt's image parts and the images given differ."""
    wanted = image_parts(prompt, placeholder)
    if wanted != len(images):
        raise ImageReject(
            "count_mismatch",
            f"the prompt has {wanted} image part(s) but the row gives {len(images)} image(s)"
            + (f" (mark each image with {{'type': 'image'}} or {placeholder!r})" if wanted < len(images) else ""),
        )
