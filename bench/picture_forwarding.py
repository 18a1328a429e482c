"""Benchmark (issue 48): what `rmspec serve --engine vllm` spends on each picture it sends on to vLLM.

A vision-language request's pictures are read by rmspec (header checks, then decoded: rmspec.serve.images) and
sent to vLLM in the conversation as `image_url` data URIs. Until fc65b40 every picture was re-encoded as a PNG
(Pillow's default zlib level 6) so that vLLM decoded the pixels rmspec had checked. Now a picture whose own bytes
decode to the same pixels under vLLM's rule (rmspec.vision.images.keep_source: PNG, JPEG or WebP in RGB or grey,
no transparency, no EXIF rotation) goes on as those bytes, and any other is re-encoded at zlib level 1.

Per picture, milliseconds of one thread (median of --repeats), for photo-like pictures (smooth colour fields with
noise) sent as JPEG (quality 90) and as PNG, at 70, 448 and 1024 px a side:
- read: rmspec.serve.images.read_images (decode and check; now also the picture's bytes kept as base64);
- send (before): a PNG at level 6 of the decoded pixels, as base64;
- send (now): rmspec.vision.images.sendable_uri (the kept bytes, or a level-1 PNG for a picture it must re-encode,
  measured on the same picture made half transparent).

    .venv/bin/python bench/picture_forwarding.py [--repeats 15] [--write]
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
RESULTS = REPO / "bench" / "results" / "picture_forwarding.md"
SIDES = (70, 448, 1024)


def photo(side: int):
    """A photo-like picture: smooth colour fields plus sensor-like noise (neither flat nor random)."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:side, 0:side] / side
    rng = np.random.default_rng(side)
    fields = [np.sin(6 * x + 3 * c) * np.cos(4 * y - c) for c in range(3)]
    pixels = np.stack(fields, axis=-1) * 100 + 128 + rng.normal(0, 6, (side, side, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype("uint8"), "RGB")


def encoded(image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def timed(work, repeats: int) -> float:
    """Median milliseconds of `work()`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.relative_to(REPO)}")
    args = parser.parse_args()

    from vllm_throughput import machine

    from rmspec.serve.images import Part, read_images
    from rmspec.serve.service import Limits
    from rmspec.vision.images import SOURCE_URI, sendable_uri

    before_machine = machine()
    rows = []
    for side in SIDES:
        image = photo(side)
        for fmt, options in (("JPEG", {"quality": 90}), ("PNG", {})):
            data = encoded(image, fmt, **options)
            url = f"data:image/{fmt.lower()};base64," + base64.b64encode(data).decode()

            def read(url=url):
                return read_images([Part("messages.0.content.0", url)], Limits())[0]

            picture = read()
            assert SOURCE_URI in picture.info  # kept: it goes on as its own bytes

            def before(picture=picture) -> str:
                return "data:image/png;base64," + base64.b64encode(encoded(picture, "PNG")).decode()

            transparent = picture.copy()
            transparent.info.pop(SOURCE_URI)  # what a picture that must be re-encoded costs now
            rows.append(
                (
                    side,
                    fmt,
                    len(data),
                    timed(read, args.repeats),
                    timed(before, args.repeats),
                    timed(lambda picture=picture: sendable_uri(picture), args.repeats),
                    timed(lambda t=transparent: sendable_uri(t), args.repeats),
                )
            )
            print(rows[-1], flush=True)
    after_machine = machine()

    table = "\n".join(
        f"| {side} px | {fmt} | {size / 1024:,.0f} KB | {read:.2f} | {old:.2f} | {new:.3f} | {re:.2f} |"
        for side, fmt, size, read, old, new, re in rows
    )
    report = f"""# What `--engine vllm` spends on each picture it sends on to vLLM (issue 48)

`.venv/bin/python bench/picture_forwarding.py --repeats {args.repeats} --write`

Per picture, milliseconds of one thread, median of {args.repeats}. Photo-like pictures (smooth colour fields with
noise). "read": rmspec.serve.images.read_images now (headers checked, pixels decoded, and the bytes kept as a base64
data: URI where they go on: that base64 is the whole cost of "send, now", counted here). "send,
before": the decoded picture re-encoded as a PNG at Pillow's default zlib level 6, as base64 (what every picture
cost until fc65b40). "send, now": rmspec.vision.images.sendable_uri on the same picture: its own bytes, kept as a
data: URI by read_images. "re-encoded, now": sendable_uri on a picture that must be re-encoded (transparency, an
EXIF rotation, GIF or BMP): a PNG at zlib level 1 (lossless: the same pixels).

| picture | sent as | bytes | read | send, before | send, now | re-encoded, now |
|---|---|---|---|---|---|---|
{table}

Machine: {before_machine["cpu"]}, {before_machine["cores"]} cores (1-minute load average {before_machine["load_1m"]:.1f}
at the start, {after_machine["load_1m"]:.1f} at the end).
"""
    print(report)
    if args.write:
        RESULTS.write_text(report)


if __name__ == "__main__":
    main()
