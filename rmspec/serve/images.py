"""A request's pictures, read so that no request can take the server down.

`rmspec serve` on a model that reads images (a vision reward model, a VLM judge) takes OpenAI
``image_url`` parts (rmspec.serve.chat.image_conversation). :func:`read_images` reads them, in this
order, and refuses before the expensive step:

1. the count: more than ``--max-images`` pictures in one request is a 413, before any is read;
2. each picture's encoded bytes (a data: URI decoded, a URL fetched with its total deadline and
   the address guard of rmspec.vision.fetch), each within ``--max-image-mb`` (413);
3. every header (rmspec.vision.images.open_image: the allowed formats' decoders only, no pixel
   decoded): one picture over the per-image pixel limit, or all of them over the request's
   ``--max-request-megapixels``, is a 413 naming the flag, before any pixel is decoded;
4. then the pixels, decoded; a picture whose own bytes decode to the same pixels anywhere keeps them
   (rmspec.vision.images.keep_source), so `--engine vllm` sends them on instead of re-encoding it.

The whole of it runs in the service's image pool (:data:`WORKERS` threads, rmspec.serve.service),
never on the event loop: a slow download or a large picture does not delay /health or any other
request. Decoded pictures wait for the model in the queue, so the server holds at most
:data:`WORKERS` request budgets of decoded pixels at once, counted from the headers before decoding
and given back when the request is answered (Service.pictures): a request that would pass it gets
503 + Retry-After, as a full queue does (memory: WORKERS x the request budget x 3 bytes of RGB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmspec.serve.request_io import ApiError

#: Threads that fetch and decode requests' images (each request's images in one of them).
WORKERS = 4


@dataclass(frozen=True)
class Part:
    """One image part of a request: where it is (`messages.0.content.1`) and its URL."""

    where: str
    url: str


def read_images(parts: list[Part], limits: Any, reserve: Any = None) -> list[Any]:
    """The parts' pictures, decoded RGB, in order; an ApiError (413, 400) naming the part and the
    flag otherwise. `reserve(pixels)`, called once every header is read and before any pixel is
    decoded, takes the request's share of the server's pixel budget (Service.pictures; a 503 when
    the server holds too many already). Blocking: call it off the event loop (Service.off_loop)."""
    from rmspec.vision.images import DEFAULT_MAX_PIXELS, ImageReject, encoded_image, keep_source, load_image, open_image

    if len(parts) > limits.max_images:
        raise ApiError(
            413,
            f"messages: {len(parts)} images in one request, over the limit of {limits.max_images} "
            "(the server's --max-images raises it)",
            "messages",
        )
    budget = limits.max_request_pixels
    per_image = min(DEFAULT_MAX_PIXELS, budget)
    opened, total = [], 0
    for part in parts:
        try:
            data, name = encoded_image(
                part.url,
                None,
                allow_urls=limits.allow_image_urls,
                max_bytes=limits.max_image_bytes,
                download_timeout=limits.image_url_timeout,
                guard=limits.guard(),
            )
            image = open_image(data, name, per_image)
        except ImageReject as exc:
            raise _refusal(part.where, exc, limits, per_image == budget) from None
        total += image.width * image.height
        if total > budget:
            raise ApiError(
                413,
                f"{part.where}: the request's images reach {total:,} pixels by this one, over the limit of "
                f"{budget:,} decoded pixels per request (the server's --max-request-megapixels raises it)",
                part.where,
            )
        opened.append((part, image, name, data))
    if reserve is not None:
        reserve(total)
    out = []
    for part, image, name, data in opened:
        try:
            out.append(keep_source(image, load_image(image, name), data))
        except ImageReject as exc:
            raise _refusal(part.where, exc, limits, False) from None
    return out


def _refusal(where: str, exc: Any, limits: Any, by_budget: bool) -> ApiError:
    if exc.reason == "too_many_bytes":
        return ApiError(413, f"{where}: {exc.detail} (the server's --max-image-mb raises it)", where)
    if exc.reason == "too_many_pixels":
        flag = "the server's --max-request-megapixels raises it" if by_budget else "the most one picture may have"
        return ApiError(413, f"{where}: {exc.detail} ({flag})", where)
    hint = {
        "url_refused": " (--allow-image-hosts names internal hosts the server may fetch from)"
        if limits.allow_image_urls
        else " (start the server with --allow-image-urls to fetch it)",
        "download_failed": " (the server's --image-url-timeout is the whole download's deadline)",
    }.get(exc.reason, "")
    return ApiError(400, f"{where}: image {exc.reason}: {exc.detail}{hint}", where)
