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


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def test_only_the_allowed_formats_are_decoded_whatever_type_is_declared(tmp_path, monkeypatch):
    """PNG, JPEG, WebP, GIF and BMP decode; EPS (Ghostscript where installed), TIFF and ICO are refused by
    the decoder, whatever the data: URI declares, in a file, as bytes or already opened by Pillow (a
    datasets Image feature); Pillow's EPS reader never even looks at the bytes."""
    from PIL import EpsImagePlugin

    picture = Image.new("RGB", (8, 8), (0, 128, 255))
    for fmt in ("PNG", "JPEG", "WEBP", "GIF", "BMP"):
        assert decode_image(encoded(picture, fmt)).size == (8, 8), fmt
    looked = []
    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", lambda self: looked.append(1) or 1 / 0)
    eps = encoded(picture, "EPS")
    (tmp_path / "a.png").write_bytes(encoded(picture, "TIFF"))  # a TIFF named .png
    refused = {
        "eps as png": "data:image/png;base64," + base64.b64encode(eps).decode(),
        "eps bytes": eps,
        "tiff file": "a.png",
        "ico feature": {"bytes": encoded(picture, "ICO"), "path": "a.ico"},
    }
    for label, value in refused.items():
        with pytest.raises(ImageReject) as caught:
            decode_image(value, base_dir=tmp_path)
        assert caught.value.reason == "undecodable", label
        assert "not a PNG, JPEG, WebP, GIF or BMP image" in caught.value.detail, label
    assert looked == []
    monkeypatch.undo()
    tiff = Image.open(io.BytesIO(encoded(picture, "TIFF")))  # decoded by another reader (datasets does this)
    assert reason_of(tiff) == "undecodable"


def test_the_byte_limit_holds_for_data_uris_files_bytes_and_features_before_any_decoding(tmp_path, monkeypatch):
    """One limit, every form: a data: URI's size is known from its length (its base64 is never decoded
    when over), a file's from its size (never read); URLs: tests/test_vision_urls.py."""
    import rmspec.vision.images as images

    data = png_bytes(64, 64)
    limit = len(data) - 1
    (tmp_path / "big.png").write_bytes(data)
    uri = "data:image/png;base64," + base64.b64encode(data).decode()
    decoded, read = [], []
    real_b64, real_read = images.base64.b64decode, images.Path.read_bytes
    monkeypatch.setattr(images.base64, "b64decode", lambda *a, **k: decoded.append(1) or real_b64(*a, **k))
    monkeypatch.setattr(images.Path, "read_bytes", lambda self: read.append(1) or real_read(self))
    for value in (uri, "big.png", data, {"bytes": data, "path": None}):
        with pytest.raises(ImageReject) as caught:
            decode_image(value, base_dir=tmp_path, max_bytes=limit)
        assert caught.value.reason == "too_many_bytes" and f"over the limit of {limit}" in caught.value.detail
    assert decoded == [] and read == []
    for value in (uri, "big.png", data, {"bytes": data, "path": None}):  # at the limit: accepted
        assert decode_image(value, base_dir=tmp_path, max_bytes=len(data)).size == (64, 64)
    # The size from the length counts base64's padding: exact at the limit, one byte over refused.
    for cut in (1, 2, 3):
        payload = base64.b64encode(data[:-cut]).decode()
        size = len(data) - cut
        try:
            decode_image("data:image/png;base64," + payload, max_bytes=size)  # the IEND chunk cut: may decode
        except ImageReject as exc:
            assert exc.reason != "too_many_bytes", exc
        assert reason_of("data:image/png;base64," + payload, max_bytes=size - 1) == "too_many_bytes"


def test_the_pixel_limit_is_read_from_the_header_for_every_form(tmp_path, monkeypatch):
    """A 7999 x 7999 header over a 1 Mpx limit is refused whatever carries it, and nothing is decoded."""
    from PIL import ImageFile

    bomb = png_header_only(7999, 7999)
    (tmp_path / "bomb.png").write_bytes(bomb)
    loaded = []
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: loaded.append(1))
    uri = "data:image/png;base64," + base64.b64encode(bomb).decode()
    for value in (uri, "bomb.png", bomb, {"bytes": bomb, "path": "bomb.png"}):
        with pytest.raises(ImageReject) as caught:
            decode_image(value, base_dir=tmp_path, max_pixels=1_000_000)
        assert caught.value.reason == "too_many_pixels" and "7999x7999 = 63984001 pixels" in caught.value.detail
    assert loaded == []
