"""OpenRLHF's remote reward protocol: `POST /get_reward`.

The trainer (`--reward.remote_url URL`, openrlhf/utils/agent.py) posts
`{"query": [str], "prompts": [str], "labels": [...]}`, usually one sample per request, and reads
`rewards`, `scores` (falling back to rewards) and `extra_logs` (lists of scalars it logs).
`query` is the decoded prompt + response with special tokens kept, so it is tokenized without
adding any, and read where training reads the same conversation (rmspec.inference.read_point:
OpenRLHF's ChatML query ends in `<|im_end|>`, training's in `<|im_end|>\n`). Extra keys are
ignored, as OpenRLHF's own example server does.
"""

from __future__ import annotations

from typing import Any, cast

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from rmspec.composite.scorer import CompositeScorer
from rmspec.inference.engine import RewardEngine
from rmspec.serve.composite import CompositeMetrics, composite_rewards
from rmspec.serve.request_io import ApiError, check_items, check_tokens, parse, read_json
from rmspec.serve.service import Service


class RewardRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: list[str] | str
    prompts: list[Any] | None = None
    labels: list[Any] | None = None
    # A composite routed by a column (approach.route_by, e.g. verl's data_source): its value per query.
    routes: list[Any] | None = None


def router(service: Service) -> APIRouter:
    api = APIRouter()
    composite = CompositeMetrics(service.metrics.registry) if service.is_composite and service.metrics else None

    @api.post("/get_reward")
    async def get_reward(request: Request) -> dict[str, Any]:
        if service.is_judge:
            raise ApiError(400, "this server holds a generative judge: use POST /v1/chat/completions", "query")
        if service.is_process:
            raise ApiError(
                400,
                "this server holds a process reward model (a score per step): "
                'POST /pooling with "task": "token_classify"',
                "query",
            )
        if service.kind.reads_images:  # its prompts hold pictures, which a query string cannot carry
            raise ApiError(
                400,
                f"this server holds a vision reward model, which reads pictures: {service.answering_route}",
                "query",
            )
        req = parse(
            RewardRequest,
            await read_json(request, service.limits.max_body_bytes),
            {"query": "a list of strings (prompt + response, already templated)"},
        )
        queries = [req.query] if isinstance(req.query, str) else req.query
        check_items(len(queries), service.limits.max_items, "query")
        if service.is_composite:  # rules, judges, models: rmspec.serve.composite
            scorer = cast(CompositeScorer, service.engine)
            return await composite_rewards(scorer, composite, queries, req.prompts, req.labels, req.routes)
        engine = service.engine
        assert isinstance(engine, RewardEngine), "judges and process models are refused above"
        encoded = [service.served(engine.encode_text(q, add_special_tokens=False)) for q in queries]
        check_tokens(encoded, "query")
        raw = await service.score(encoded, request=request)
        outputs = [service.present(v) for v in raw]
        rewards = [v[0] for v in outputs]
        extra: dict[str, list[float]] = {"truncated": [float(e.truncated) for e in encoded]}
        if service.normalize:
            extra["raw_reward"] = [v[0] for v in raw]
        spread = service.reward_std(raw)
        if spread is not None:  # an ensemble: its members' disagreement, logged by the trainer
            extra["reward_std"] = spread
        if len(service.engine.labels) > 1:  # pointwise: every attribute, logged by the trainer
            for k, name in enumerate(service.engine.labels):
                extra[name] = [v[k] for v in outputs]
        return {"rewards": rewards, "scores": rewards, "extra_logs": extra}

    return api
