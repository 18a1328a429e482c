"""The OpenAI chat API for generative judges: `POST /v1/chat/completions` (no streaming) and
`GET /v1/models` (every server).

A judge replies greedily (its verdict must not depend on a sampling seed), so temperature and
top_p are accepted and not used; `max_tokens` / `max_completion_tokens` cap the reply.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from rmspec.serve.chat import conversation
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


def router(service: Service) -> APIRouter:
    api = APIRouter()

    @api.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": service.model_name, "object": "model", "created": int(time.time()),
                                            "owned_by": "rmspec", "max_model_len": service.engine.max_length}]}

    @api.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        if not service.is_judge:
            raise ApiError(400, "this server holds a reward model, which scores but does not write: "
                                "use POST /classify, /pooling or /get_reward", "messages")
        req = parse(ChatRequest, await read_json(request, service.limits.max_body_bytes))
        if req.stream:
            raise ApiError(422, "stream: streaming is not supported; send stream: false", "stream")
        if req.n not in (None, 1):
            raise ApiError(422, "n: a greedy judge gives one reply; send n: 1", "n")
        conv = conversation(req.messages)
        [reply] = await service.generate([conv], req.max_completion_tokens or req.max_tokens)
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": req.model or service.model_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                             "finish_reason": reply.finish_reason, "logprobs": None}],
                "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                          "total_tokens": reply.prompt_tokens + reply.completion_tokens}}

    return api
