"""vLLM's pooling API: `POST /classify` and `POST /pooling` (what verl's reward loop calls).

Request (vllm/entrypoints/pooling/*/protocol.py): `input` (a string, a list of strings, token
ids or a list of them, tokenized with `add_special_tokens`, default true) or `messages` (a
conversation ending with the assistant reply, laid out on the server as training laid it out),
`use_activation` (on unless switched off: sigmoid for one output, softmax for several),
`truncate_prompt_tokens` with `truncation_side`, and on /pooling `encoding_format` (float or
base64 of float32). verl sends `{"model", "input", "use_activation": false}` and reads
`data[-1]["probs"][-1]`.

As current vLLM: bad requests are 400, a `model` this server does not serve is 404, `normalize`
is refused (removed in vLLM, 400), the removed `activation`/`softmax` flags are ignored, and
`label` is `config.id2label[argmax]`. A text that is a complete conversation in the model's
template is read where training reads it (rmspec.inference.read_point). Each item also says
whether its text was `truncated`.
"""

from __future__ import annotations

import base64
import struct
import time
import uuid
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from rmspec.inference.encoding import Encoded
from rmspec.inference.engine import RewardEngine
from rmspec.inference.scorers.vision_prompts import WholeTooLong
from rmspec.serve.chat import check_layout, conversation, split_reply
from rmspec.serve.request_io import ApiError, check_items, check_tokens, parse, read_json
from rmspec.serve.service import Service, activation


class PoolingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # vLLM ignores unknown fields too (activation, softmax...)
    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]] | None = None
    messages: list[Any] | None = None
    use_activation: bool | None = None
    truncate_prompt_tokens: int | None = Field(default=None, ge=-1)
    truncation_side: Literal["left", "right"] | None = None
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = False
    continue_final_message: bool = False
    task: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    embed_dtype: Literal["float32"] = "float32"
    endianness: Literal["native", "little"] = "native"


def _encode(service: Service, req: PoolingRequest, raw: dict, pictures: tuple[Any, list[Any]] | None) -> list[Encoded]:
    """The request's items, encoded; `pictures`: a model that reads images gets its messages with
    each image part as a placeholder and the decoded images (read off the event loop by _values)."""
    engine = service.engine
    if "normalize" in raw:
        raise ApiError(
            400,
            "Parameter `normalize` was removed; use `use_activation` instead. (rmspec normalizes "
            "rewards on the server: rmspec serve --normalize/--no-normalize)",
            "normalize",
        )
    limit = None if req.truncate_prompt_tokens in (None, -1) else req.truncate_prompt_tokens
    if limit == 0:
        raise ApiError(
            400, "truncate_prompt_tokens: must be -1 (the model's limit) or at least 1", "truncate_prompt_tokens"
        )
    if req.truncation_side == "right" and limit is not None:
        raise ApiError(
            400,
            "truncation_side: 'right' would cut the end of the response, where the reward is read; "
            "rmspec cuts the start of the prompt (send 'left' or leave it out)",
            "truncation_side",
        )
    if (req.input is None) == (req.messages is None):
        raise ApiError(
            400, "input: give either input (text or token ids) or messages, not both and not neither", "input"
        )
    if req.messages is not None:
        if req.add_generation_prompt or req.continue_final_message:
            field = "add_generation_prompt" if req.add_generation_prompt else "continue_final_message"
            raise ApiError(
                400,
                f"{field}: a reward is read after the complete assistant reply; send messages ending "
                "with the reply and leave this false",
                field,
            )
        if pictures is not None:  # image_url parts, read by _values; the kind's encoder reads them
            messages, images = pictures
            prompt, reply = split_reply(conversation(messages))
            try:
                return service.kind.encode_with_images(engine, prompt, reply, images)
            except WholeTooLong as exc:  # past the vLLM engine's model length: vLLM's own status for it
                raise ApiError(400, str(exc), "messages") from None
        prompt, reply = split_reply(conversation(req.messages))
        assert isinstance(engine, RewardEngine), "a server that is not a process model holds a RewardEngine"
        check_layout(engine.layout, prompt)  # a tool turn the template drops: 422
        encoded = engine.encode([(prompt, reply)])  # the training layout, segment ids included
        return [engine.encode_ids(e.ids, limit) if limit and len(e.ids) > limit else e for e in encoded]
    if service.kind.reads_images:
        raise ApiError(
            400, "input: a vision reward model scores messages (with image_url parts); send messages", "input"
        )
    given = req.input
    items: list[Any]  # each a text or a list of token ids
    if isinstance(given, str) or (isinstance(given, list) and given and isinstance(given[0], int)):
        items = [given]
    else:
        items = given or []
    if not items:
        raise ApiError(400, "input: empty list, nothing to score", "input")
    check_items(len(items), service.limits.max_items, "input")
    special = True if req.add_special_tokens is None else req.add_special_tokens
    vocab = len(engine.tokenizer)
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise ApiError(400, f"input.{i}: empty text", f"input.{i}")
            # as its kind reads a text: a reward model where training reads it, a PRM as the client laid it out
            out.append(service.served(service.kind.encode_text(engine, item, add_special_tokens=special, limit=limit)))
            continue
        if not item or any(t < 0 or t >= vocab for t in item):
            raise ApiError(
                400,
                f"input.{i}: token ids must be a non-empty list within the vocabulary (0..{vocab - 1})",
                f"input.{i}",
            )
        out.append(service.served(service.kind.encode_ids(engine, item, limit)))
    check_tokens(out, "input")
    return out


def _usage(encoded: list[Encoded]) -> dict[str, Any]:
    n = sum(len(e.ids) for e in encoded)
    return {"prompt_tokens": n, "total_tokens": n, "completion_tokens": 0, "prompt_tokens_details": None}


async def _values(
    service: Service, request: Request, pooling: bool = False
) -> tuple[PoolingRequest, str, list[Encoded], list[Any], list[float] | None]:
    raw = await read_json(request, service.limits.max_body_bytes)
    req = parse(
        PoolingRequest, raw, {"input": "a string, a list of strings, a list of token ids or a list of such lists"}
    )
    model = service.check_model(req.model)
    if service.is_judge:
        raise ApiError(400, "this server holds a generative judge: use POST /v1/chat/completions", "input")
    if service.is_composite:
        raise ApiError(
            400, "this server holds a composite reward: use POST /get_reward (query, prompts, labels)", "input"
        )
    per_token = service.is_process
    if pooling and per_token and req.task != "token_classify":
        raise ApiError(
            400,
            f"task: {req.task!r} is not served; this is a process reward model (task: token_classify)"[:300],
            "task",
        )
    if pooling and not per_token and req.task not in (None, "classify"):
        raise ApiError(
            400, f"task: {req.task!r} is not served; this is a sequence reward model (task: classify)"[:300], "task"
        )
    if per_token and req.messages is not None:
        raise ApiError(
            400,
            "messages: a process reward model scores token ids or text with its step separators; give input",
            "messages",
        )
    if not pooling and req.encoding_format != "float":
        raise ApiError(
            400, "encoding_format: /classify answers probs as floats; base64 is a /pooling option", "encoding_format"
        )
    if service.kind.reads_images and req.messages is not None:  # fetched and decoded off the event loop
        async with service.pictures(req.messages) as pictures:  # held until scored
            # rendered and tokenized off the loop too: at 32 clients it held the loop 31% of the time (py-spy)
            encoded = await service.off_loop(_encode, service, req, raw, pictures)
            outputs = await service.score(encoded, per_token=pooling and per_token, request=request)
    else:
        encoded = _encode(service, req, raw, None)
        outputs = await service.score(encoded, per_token=pooling and per_token, request=request)
    use = True if req.use_activation is None else req.use_activation
    if per_token:  # vLLM's token_classify: one [labels] row per token, softmax per token when on
        rows = [[list(t) for t in item] for item in outputs]
        if use:
            rows = [[activation(t) for t in item] for item in rows]
        return req, model, encoded, rows, None
    values = [service.present(v) for v in outputs]
    if use:
        values = [activation(v) for v in values]
    # An ensemble: each item's members' std, answered as `reward_std` beside its data (a key vLLM
    # clients ignore).
    return req, model, encoded, values, service.reward_std(outputs)


def _base64(values: list[Any]) -> str:
    """vLLM's base64 encoding: the float32 array's bytes (native order, little-endian here), rows flattened."""
    flat = [x for row in values for x in row] if values and isinstance(values[0], list) else values
    return base64.b64encode(struct.pack(f"<{len(flat)}f", *flat)).decode("ascii")


def _id2label(service: Service) -> list[str]:
    """vLLM's `label`: the config's id2label name of each output (LABEL_0 by default)."""
    config = getattr(service.engine.model, "config", None)
    id2label = getattr(config, "id2label", None) or {}
    n = len(service.engine.labels)
    return [str(id2label.get(i, id2label.get(str(i), f"LABEL_{i}"))) for i in range(n)]


def _with_std(data: list[dict[str, Any]], spread: list[float] | None) -> None:
    if spread is not None:
        for item, s in zip(data, spread):
            item["reward_std"] = s


def _listing(
    prefix: str, model: str, data: list[dict[str, Any]], spread: list[float] | None, encoded: list[Encoded]
) -> dict[str, Any]:
    """vLLM's answer to /classify and /pooling: the items (with an ensemble's reward_std) in a list."""
    _with_std(data, spread)
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": data,
        "usage": _usage(encoded),
    }


def router(service: Service) -> APIRouter:
    api = APIRouter()
    labels = _id2label(service)

    async def classify(request: Request) -> dict[str, Any]:
        req, model, encoded, values, spread = await _values(service, request)
        data = [
            {
                "index": i,
                "label": labels[max(range(len(v)), key=v.__getitem__)] if len(labels) >= len(v) else None,
                "probs": v,
                "num_classes": len(v),
                "truncated": e.truncated,
            }
            for i, (v, e) in enumerate(zip(values, encoded))
        ]
        return _listing("classify", model, data, spread, encoded)

    async def pooling(request: Request) -> dict[str, Any]:
        req, model, encoded, values, spread = await _values(service, request, pooling=True)
        encode = _base64 if req.encoding_format == "base64" else (lambda v: v)
        data = [
            {"index": i, "object": "pooling", "data": encode(v), "truncated": e.truncated}
            for i, (v, e) in enumerate(zip(values, encoded))
        ]
        return _listing("pool", model, data, spread, encoded)

    for path in ("/classify", "/v1/classify"):
        api.add_api_route(path, classify, methods=["POST"])
    api.add_api_route("/pooling", pooling, methods=["POST"])
    return api
