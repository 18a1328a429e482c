"""Reading requests: the body limit, JSON, and 4xx errors that name the field.

Bodies are read here and nowhere else, and never logged: an error message names the field and
what was expected, not the value that was sent.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    """An HTTP error answered as `{"error": {"message", "type", "param", "code"}}` (the OpenAI and
    vLLM error shape, which their clients read)."""

    def __init__(self, status: int, message: str, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers or {}

    def body(self) -> dict[str, Any]:
        kind = {
            400: "BadRequestError",
            401: "AuthenticationError",
            404: "NotFoundError",
            413: "RequestTooLarge",
            422: "UnprocessableEntity",
            503: "ServiceUnavailable",
        }.get(self.status, "Error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.status}}


async def read_json(request: Any, limit: int) -> Any:
    """The parsed JSON body; 413 above `limit` bytes (declared or streamed), 422 if not JSON."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise ApiError(
                    413,
                    f"request body of {int(declared)} bytes is over the limit of {limit} bytes "
                    "(the server's --max-body-mb raises it)",
                    "body",
                )
        except ValueError:
            raise ApiError(400, "Content-Length is not a number", "content-length") from None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(
                413, f"request body is over the limit of {limit} bytes (the server's --max-body-mb raises it)", "body"
            )
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise ApiError(422, "the request body is empty: send a JSON object", "body")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the request body is not UTF-8 text (byte {exc.start})", "body") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(
            422, f"the request body is not valid JSON at line {exc.lineno} column {exc.colno}", "body"
        ) from None
    except RecursionError:  # thousands of nested brackets (found by tests/fuzz)
        raise ApiError(422, "the request body nests JSON too deeply", "body") from None
    if SURROGATE_ESCAPE.search(text):  # valid JSON, but a lone surrogate is not text a tokenizer can read
        where = _first_unencodable(data, "")
        if where is not None:
            raise ApiError(
                400,
                f"{where or 'body'}: the text holds a lone surrogate (an escaped \\ud800-\\udfff "
                f"without its pair), which is not Unicode text",
                where or "body",
            )
    return data


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _first_unencodable(value: Any, path: str) -> str | None:
    """The field path (`query.3`, `messages.1.content`) of the first string that is not valid
    Unicode (a lone surrogate), or None. Iterative: the body may nest deeply."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(item, dict):
            for key, v in reversed(list(item.items())):
                if _bad(key):
                    return where
                stack.append((v, f"{where}.{key}" if where else str(key)))
        elif isinstance(item, list):
            stack.extend((v, f"{where}.{i}" if where else str(i)) for i, v in reversed(list(enumerate(item))))
    return None


def _bad(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def parse(model: type[M], data: Any, expected: dict[str, str] | None = None) -> M:
    """`data` as `model`, or a 422 naming the first bad field (`query.2: Input should be a valid string`);
    `expected` words what a field takes where pydantic's union message would confuse."""
    if not isinstance(data, dict):
        raise ApiError(422, f"the request body must be a JSON object, got {type(data).__name__}", "body")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        first = errors[0]
        loc = ".".join(str(p) for p in first["loc"] if not _is_union_tag(p)) or "body"
        top = str(first["loc"][0]) if first["loc"] else ""
        if expected and top in expected and first["type"] != "missing":
            raise ApiError(422, f"{top}: expected {expected[top]}", top) from None
        more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise ApiError(422, f"{loc}: {first['msg']}{more}", loc) from None


def _is_union_tag(part: Any) -> bool:
    # pydantic names the union member it tried (`list[str]`, `str`): not a field of the request.
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "float", "bool", "function-after"})


def check_tokens(encoded: list, field: str) -> None:
    """A text with no tokens cannot be scored (the model needs one): 422 naming the item."""
    for i, e in enumerate(encoded):
        if not e.ids:
            raise ApiError(
                422, f"{field}.{i}: the text has no tokens to score (empty or only whitespace)", f"{field}.{i}"
            )


def check_items(n: int, cap: int, field: str) -> None:
    if n > cap:
        raise ApiError(
            413,
            f"{field}: {n} items in one request, over the limit of {cap} (the server's --max-items raises it)",
            field,
        )


class ClientGone(Exception):
    """The client closed the connection before its answer was ready (nothing is sent back)."""


async def unless_disconnected(request: Any, work: Any) -> Any:
    """Await the coroutine `work`, cancelling it if the client disconnects first (ClientGone).

    The body has been read by then, so the next ASGI message on the connection can only be
    `http.disconnect`: waiting for it costs nothing while the client stays.
    """
    import asyncio

    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnect(request))
    try:
        done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watch.cancel()
        raise
    if task in done:
        watch.cancel()
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise ClientGone()


async def _disconnect(request: Any) -> None:
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return
