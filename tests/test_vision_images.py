"""Every refusal reason of rmspec.vision.images.decode_image on a real file, bytes or URI of that kind,
and the accepted forms decoded to the same pixels as Pillow reads them directly."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import pytest
from PIL import Image

from rmspec.vision.images import ImageReject, check_count, decode_image, image_parts, images_of


def png_bytes(width: int = 8, height: int = 6, colour: tuple[int, int, int] = (200, 30, 10)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims width x height, with one empty IDAT: Pillow reads the size, not pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def reason_of(value, **kwargs) -> str:
    with pytest.raises(ImageReject) as caught:
        decode_image(value, **kwargs)
    return caught.value.reason


def test_accepted_forms_decode_to_the_same_pixels(tmp_path):
    data = png_bytes()
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(data)
    expected = Image.open(io.BytesIO(data)).convert("RGB").tobytes()
    uri = "data:image/png;base64," + base64.b64encode(data).decode()
    forms = [
        "img/a.png",  # relative to base_dir
        str(tmp_path / "img" / "a.png"),
        "file://" + str(tmp_path / "img" / "a.png"),
        uri,
        data,
        {"bytes": data, "path": None},
        {"bytes": None, "path": "img/a.png"},
        Image.open(io.BytesIO(data)),
    ]
    for value in forms:
        image = decode_image(value, base_dir=tmp_path)
        assert image.mode == "RGB" and image.size == (8, 6)
        assert image.tobytes() == expected


def test_each_reason(tmp_path):
    data = png_bytes(32, 32)
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "text.png").write_bytes(b"this is not an image")
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    jpeg = io.BytesIO()
    Image.effect_noise((64, 64), 50).convert("RGB").save(jpeg, format="JPEG")
    (tmp_path / "cut.jpg").write_bytes(jpeg.getvalue()[: len(jpeg.getvalue()) // 2])
    assert reason_of("nowhere.png", base_dir=tmp_path) == "missing"
    assert reason_of(None) == "missing"
    assert reason_of({"bytes": None, "path": None}) == "missing"
    assert reason_of("empty.png", base_dir=tmp_path) == "zero_size"
    assert reason_of("text.png", base_dir=tmp_path) == "undecodable"
    assert reason_of("data:image/png;base64,@@@") == "undecodable"
    assert reason_of(12) == "undecodable"
    assert reason_of("cut.png", base_dir=tmp_path) == "truncated"
    assert reason_of("cut.jpg", base_dir=tmp_path) == "truncated"
    # A header that claims 0 x 5 pixels, and one claiming 100k x 100k (a decompression bomb): refused
    # from the header, before any pixel is decoded.
    assert reason_of(png_header_only(0, 5)) in ("zero_size", "undecodable")
    assert reason_of(png_header_only(100_000, 100_000)) == "too_many_pixels"
    assert reason_of(data, max_pixels=32 * 32 - 1) == "too_many_pixels"
    assert decode_image(data, max_pixels=32 * 32).size == (32, 32)
    assert reason_of(data, max_bytes=len(data) - 1) == "too_many_bytes"
    (tmp_path / "ok.png").write_bytes(data)
    assert reason_of("ok.png", base_dir=tmp_path, max_bytes=10) == "too_many_bytes"
    assert reason_of("https://example.com/a.png") == "url_refused"
    assert reason_of("http://example.com/a.png") == "url_refused"


def test_image_parts_and_count():
    conversation = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and"}, {"type": "image"}]},
        {"role": "assistant", "content": "two"},
    ]
    assert image_parts(conversation) == 2
    assert image_parts("<image>\nWhat colour?") == 1
    assert image_parts("<img> twice <img>", placeholder="<img>") == 2
    assert image_parts("no image") == 0
    assert images_of(None) == [] and images_of("a.png") == ["a.png"] and images_of(["a", "b"]) == ["a", "b"]
    check_count(conversation, ["a", "b"])
    with pytest.raises(ImageReject) as caught:
        check_count(conversation, ["a"])
    assert caught.value.reason == "count_mismatch" and "2 image part(s)" in caught.value.detail
    with pytest.raises(ImageReject):
        check_count("no placeholder", ["a"])
