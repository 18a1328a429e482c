"""The OpenAI chat API for generative judges: `POST /v1/chat/completions` (no streaming) and
`GET /v1/models` (every server).

A judge replies greedily (its verdict must not depend on a sampling seed), so temperature and
top_p are accepted and not used. `max_tokens` / `max_completion_tokens` are honoured up to the
model's context (prompt + reply), else a 400 saying the limit, as vLLM; without them the reply
gets the run's `max_new_tokens`. Usage and `finish_reason` count the generated tokens.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from rmspec.inference.engine import RewardEngine
from rmspec.serve.chat import check_layout, conversation
from rmspec.serve.request_io import ApiError, parse, read_json
from rmspec.serve.service import Service


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[Any]
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int | None = Field(default=None, ge=1)
    stream: bool | None = None


def _model_card(service: Service, name: str, created: int) -> dict[str, Any]:
    """vLLM's ModelCard, every field it sends."""
    return {
        "id": name,
        "object": "model",
        "created": created,
        "owned_by": "rmspec",
        "root": service.model_name,
        "parent": None,
        "max_model_len": service.engine.max_length,
        "permission": [
            {
                "id": f"modelperm-{uuid.uuid4().hex}",
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }


def check_images(conv: Any, images: list[Any]) -> None:
    """A 400 when the pictures' places (rmspec.vision.marks, one per image part) and the images differ in
    number (a VLM judge's; a `<image>` written in the text is text)."""
    from rmspec.vision.images import ImageReject, check_count
    from rmspec.vision.marks import PICTURE

    try:
        check_count(conv, images, PICTURE)
    except ImageReject as exc:
        raise ApiError(400, f"messages: {exc.detail}", "messages") from None


def router(service: Service) -> APIRouter:
    api = APIRouter()

    @api.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [_model_card(service, service.model_name, int(time.time()))]}

    @api.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        req = parse(ChatRequest, await read_json(request, service.limits.max_body_bytes))
        model = service.check_model(req.model)
        if not service.is_judge:
            raise ApiError(
                400,
                f"this server holds a {service.engine.kind} model, which scores but does not write: "
                f"use {service.answering_route}",
                "messages",
            )
        if req.stream:
            raise ApiError(400, "stream: streaming is not supported; send stream: false", "stream")
        if req.n not in (None, 1):
            raise ApiError(400, "n: a greedy judge gives one reply; send n: 1", "n")
        vision = getattr(service.engine, "encoder", None) is not None  # a VLM judge: image_url parts, checked
        async with service.pictures(req.messages, reads=vision) as (messages, images):  # held until answered
            conv = conversation(messages)
            assert isinstance(service.engine, RewardEngine), "a judge is a RewardEngine"
            check_layout(service.engine.layout, conv)  # a tool turn the template drops: 422
            if vision:
                check_images(conv, images)
            [reply] = await service.generate(
                [conv], req.max_completion_tokens or req.max_tokens, request=request, images=[images]
            )
        # Every field vLLM's ChatCompletionResponse sends, so clients that read them find them.
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": [],
            "reasoning_content": None,
        }
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                    "stop_reason": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                "prompt_tokens_details": None,
            },
            "prompt_logprobs": None,
            "kv_transfer_params": None,
        }

    return api
