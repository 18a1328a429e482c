"""A served picture goes on to vLLM as the request's own bytes only where vLLM decodes them to the pixels rmspec
decoded (rmspec.vision.images.keep_source / sendable_uri); any other picture goes as a PNG of rmspec's pixels.

vLLM's rule (vllm/multimodal/media/image.py, ImageMediaIO.load_bytes, image_mode RGB) is written out here as the
independent reference: EXIF orientation applied, transparency composited on white, then RGB. rmspec applies
neither, in training as in serving, so a rotated JPEG or a transparent PNG sent on unchanged would be read as
other pixels than the model was trained on. tests/test_export_vllm_idefics3.py sends such pictures through the
real engine and checks the rewards."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from helpers.ci import need

need("PIL")
from PIL import Image, ImageOps  # noqa: E402

from rmspec.inference.scorers.vision_prompts import openai_messages  # noqa: E402
from rmspec.serve.images import Part, read_images  # noqa: E402
from rmspec.serve.service import Limits  # noqa: E402


def vllm_pixels(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    image = ImageOps.exif_transpose(image)
    image.load()
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = Image.new("RGB", rgba.size, (255, 255, 255))
        image.paste(rgba, mask=rgba.split()[3])
    return np.asarray(image.convert("RGB"))


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def sent(data: bytes, declared: str = "image/png") -> tuple[np.ndarray, bytes]:
    """rmspec's pixels of a request's picture, and the bytes `--engine vllm` sends on for it."""
    url = f"data:{declared};base64," + base64.b64encode(data).decode()
    (picture,) = read_images([Part("messages.0.content.0", url)], Limits())
    messages = openai_messages([{"role": "user", "content": [{"type": "image", "image": picture}]}], "a reply")
    out = messages[0]["content"][0]["image_url"]["url"]
    assert out.startswith("data:image/")
    return np.asarray(picture), base64.b64decode(out.split(",", 1)[1])


def gradient(mode: str = "RGB", size: tuple[int, int] = (40, 24)) -> Image.Image:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(pixels, "RGB").convert(mode)


@pytest.mark.parametrize(
    "fmt, mode",
    [("PNG", "RGB"), ("PNG", "L"), ("JPEG", "RGB"), ("JPEG", "L"), ("WEBP", "RGB")],
)
def test_a_picture_vllm_reads_as_rmspec_does_goes_on_unchanged(fmt, mode):
    data = encoded(gradient(mode), fmt)
    pixels, forwarded = sent(data, "image/jpeg")  # the declared type is not trusted: the bytes are
    assert forwarded == data
    assert np.array_equal(vllm_pixels(forwarded), pixels)


def transparent_png() -> bytes:
    image = gradient("RGBA")
    alpha = np.zeros((24, 40), dtype=np.uint8)
    alpha[:, 20:] = 255
    image.putalpha(Image.fromarray(alpha, "L"))
    return encoded(image, "PNG")


def palette_with_transparency() -> bytes:
    image = gradient("P")
    return encoded(image, "PNG", transparency=0)


def rotated_jpeg() -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    return encoded(gradient(), "JPEG", exif=exif.tobytes())


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(transparent_png(), id="rgba"),
        pytest.param(palette_with_transparency(), id="palette-trns"),
        pytest.param(rotated_jpeg(), id="exif-rotated"),
        pytest.param(encoded(gradient("P"), "GIF"), id="gif"),
    ],
)
def test_a_picture_vllm_would_read_otherwise_goes_as_rmspecs_pixels(data):
    pixels, forwarded = sent(data)
    assert forwarded != data and forwarded.startswith(b"\x89PNG")
    assert np.array_equal(vllm_pixels(forwarded), pixels)


@pytest.mark.parametrize("data", [transparent_png(), rotated_jpeg()], ids=["rgba", "exif-rotated"])
def test_those_pictures_own_bytes_would_reach_the_model_as_other_pixels(data):
    """Why they are re-encoded: sent unchanged, vLLM would decode pixels rmspec never trained on."""
    pixels, _ = sent(data)
    theirs = vllm_pixels(data)
    assert theirs.shape != pixels.shape or not np.array_equal(theirs, pixels)
