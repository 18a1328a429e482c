"""vLLM's pooling API: `POST /classify` and `POST /pooling` (what verl's reward loop calls).

Request (vllm/entrypoints/pooling/*/protocol.py): `input` (a string, a list of strings, token
ids or a list of them, tokenized with `add_special_tokens`, default true) or `messages` (a
conversation ending with the assistant reply, laid out on the server as training laid it out),
the activation switch (`use_activation`, or the older `activation` / `softmax`; on unless switched
off: sigmoid for one output, softmax for several) and `truncate_prompt_tokens`. verl sends
`{"model", "input", "activation": false}` and reads `data[-1]["probs"][-1]`.

Responses have vLLM's shapes; each item also says whether its text was `truncated`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from rmspec.inference.encoding import Encoded
from rmspec.serve.chat import conversation, split_reply
from rmspec.serve.request_io import ApiError, check_items, check_tokens, parse, read_json
from rmspec.serve.service import Service, activation


class PoolingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]] | None = None
    messages: list[Any] | None = None
    use_activation: bool | None = None
    activation: bool | None = None
    softmax: bool | None = None
    truncate_prompt_tokens: int | None = Field(default=None, ge=-1)
    add_special_tokens: bool | None = None
    task: str | None = None


def _encode(service: Service, req: PoolingRequest) -> list[Encoded]:
    engine = service.engine
    limit = None if req.truncate_prompt_tokens in (None, -1) else req.truncate_prompt_tokens
    if limit == 0:
        raise ApiError(422, "truncate_prompt_tokens: must be -1 (the model's limit) or at least 1", "truncate_prompt_tokens")
    if (req.input is None) == (req.messages is None):
        raise ApiError(422, "input: give either input (text or token ids) or messages, not both and not neither", "input")
    if req.messages is not None:
        prompt, reply = split_reply(conversation(req.messages))
        encoded = engine.encode([(prompt, reply)])  # the training layout, segment ids included
        return [engine.encode_ids(e.ids, limit) if limit and len(e.ids) > limit else e for e in encoded]
    items = req.input
    if isinstance(items, str) or (isinstance(items, list) and items and isinstance(items[0], int)):
        items = [items]
    if not items:
        raise ApiError(422, "input: empty list, nothing to score", "input")
    check_items(len(items), service.limits.max_items, "input")
    special = True if req.add_special_tokens is None else req.add_special_tokens
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise ApiError(422, f"input.{i}: empty text", f"input.{i}")
            ids = engine.tokenizer(item, add_special_tokens=special)["input_ids"]
        else:
            vocab = len(engine.tokenizer)
            if not item or any(t < 0 or t >= vocab for t in item):
                raise ApiError(422, f"input.{i}: token ids must be a non-empty list within the vocabulary (0..{vocab - 1})", f"input.{i}")
            ids = item
        out.append(engine.encode_ids(ids, limit))
    check_tokens(out, "input")
    return out


def _use_activation(req: PoolingRequest) -> bool:
    for flag in (req.use_activation, req.activation, req.softmax):
        if flag is not None:
            return flag
    return True


def _usage(encoded: list[Encoded]) -> dict[str, Any]:
    n = sum(len(e.ids) for e in encoded)
    return {"prompt_tokens": n, "total_tokens": n, "completion_tokens": 0, "prompt_tokens_details": None}


async def _values(service: Service, request: Request, pooling: bool = False) -> tuple[PoolingRequest, list[Encoded], list[list[float]]]:
    if service.is_judge:
        raise ApiError(400, "this server holds a generative judge: use POST /v1/chat/completions", "input")
    req = parse(PoolingRequest, await read_json(request, service.limits.max_body_bytes),
                {"input": "a string, a list of strings, a list of token ids or a list of such lists"})
    per_token = service.is_process
    if pooling and per_token and req.task != "token_classify":
        raise ApiError(422, f"task: {req.task!r} is not served; this is a process reward model (task: token_classify)"[:300], "task")
    if pooling and not per_token and req.task not in (None, "classify"):
        raise ApiError(422, f"task: {req.task!r} is not served; this is a sequence reward model (task: classify)"[:300], "task")
    if per_token and req.messages is not None:
        raise ApiError(422, "messages: a process reward model scores token ids or text with its step separators; give input", "messages")
    encoded = _encode(service, req)
    raw = await service.score(encoded, per_token=pooling and per_token)
    if per_token:  # vLLM's token_classify: one [labels] row per token, softmax per token when on
        rows = [[list(t) for t in item] for item in raw]
        if _use_activation(req):
            rows = [[activation(t) for t in item] for item in rows]
        return req, encoded, rows
    values = [service.present(v) for v in raw]
    if _use_activation(req):
        values = [activation(v) for v in values]
    return req, encoded, values


def router(service: Service) -> APIRouter:
    api = APIRouter()
    labels = service.engine.labels

    async def classify(request: Request) -> dict[str, Any]:
        req, encoded, values = await _values(service, request)
        data = [{"index": i, "label": labels[max(range(len(v)), key=v.__getitem__)], "probs": v,
                 "num_classes": len(v), "truncated": e.truncated} for i, (v, e) in enumerate(zip(values, encoded))]
        return {"id": f"classify-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()),
                "model": req.model or service.model_name, "data": data, "usage": _usage(encoded)}

    async def pooling(request: Request) -> dict[str, Any]:
        req, encoded, values = await _values(service, request, pooling=True)
        data = [{"index": i, "object": "pooling", "data": v, "truncated": e.truncated}
                for i, (v, e) in enumerate(zip(values, encoded))]
        return {"id": f"pool-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()),
                "model": req.model or service.model_name, "data": data, "usage": _usage(encoded)}

    for path in ("/classify", "/v1/classify"):
        api.add_api_route(path, classify, methods=["POST"])
    api.add_api_route("/pooling", pooling, methods=["POST"])
    return api
