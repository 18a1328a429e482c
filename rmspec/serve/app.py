"""The FastAPI app: auth, limits, errors, /health, /metrics and the protocol routers.

- Auth: with a token, every route but /health needs `Authorization: Bearer TOKEN`, compared in
  constant time (hmac.compare_digest).
- Errors are `{"error": {"message", "type", "param", "code"}}`: 401, 404 (route, or a `model` not
  served), 413 (body, items per request, or more items than the queue can ever hold: never worth a
  retry; the message names the flag that raises the limit), 400 (text that is not Unicode, and on
  the vLLM/OpenAI routes every bad request, as vLLM answers), 422 (a bad field on /get_reward,
  as OpenRLHF's own FastAPI server answers), 503 + Retry-After (queue full now), 500 (our failure;
  the body says so without echoing the request). Client mistakes never log a traceback; nothing
  logs request bodies or headers.
- A client that disconnects before its answer cancels its queued work (499 in the metrics).
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from rmspec.inference.engine_base import EngineDown
from rmspec.serve import openai, openrlhf, vllm
from rmspec.serve.batcher import NeverFits, QueueFull
from rmspec.serve.metrics import Metrics
from rmspec.serve.request_io import ApiError, ClientGone
from rmspec.serve.service import Service

log = logging.getLogger("rmspec.serve")
OPEN_PATHS = {"/health"}
# vLLM's and OpenAI's routes answer every bad request with 400 (their clients raise BadRequestError).
VLLM_PATHS = {"/classify", "/v1/classify", "/pooling", "/v1/chat/completions", "/v1/models"}


class Guard:
    """Pure ASGI middleware: bearer auth, then request counting and latency by route."""

    def __init__(self, app: Any, token: str | None, metrics: Metrics):
        self.app, self.metrics = app, metrics
        self.token = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, started, status = scope["path"], time.perf_counter(), [500]

        async def tracked(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            if self.token is not None and path not in OPEN_PATHS and not self._authorized(scope):
                err = ApiError(
                    401,
                    "missing or wrong bearer token: send Authorization: Bearer <token>",
                    "authorization",
                    {"WWW-Authenticate": "Bearer"},
                )
                return await _json(err)(scope, receive, tracked)
            await self.app(scope, receive, tracked)
        finally:
            self.metrics.observe_request(path, status[0], time.perf_counter() - started)

    def _authorized(self, scope: dict) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
        assert self.token is not None
        return hmac.compare_digest(given, self.token)


def _json(err: ApiError, path: str | None = None) -> JSONResponse:
    if err.status == 422 and path in VLLM_PATHS:
        err = ApiError(400, err.message, err.param, err.headers)
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


def create_app(service: Service, *, token: str | None = None, shutdown_timeout: float | None = None) -> FastAPI:
    metrics = Metrics(
        {
            "/get_reward",
            "/classify",
            "/v1/classify",
            "/pooling",
            "/v1/chat/completions",
            "/v1/models",
            "/health",
            "/metrics",
        }
    )
    service.metrics = metrics

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        batcher = service.make_batcher(on_batch=metrics.observe_batch)
        batcher.on_cancel = metrics.cancelled_items.inc
        batcher.start()
        yield
        await batcher.stop(shutdown_timeout)  # uvicorn has let in-flight requests finish (or time out) by now

    app = FastAPI(title="rmspec serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service, app.state.metrics = service, metrics

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        if exc.status == 413:
            metrics.too_large.inc()
        return _json(exc, request.url.path)

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, exc: QueueFull) -> JSONResponse:
        metrics.rejected_full.inc()
        return _json(ApiError(503, f"the server is busy ({exc}); retry shortly", None, {"Retry-After": "1"}))

    @app.exception_handler(EngineDown)
    async def engine_down(request: Request, exc: EngineDown) -> JSONResponse:
        return _json(ApiError(503, f"the inference engine is down, the server is exiting: {exc}", None))

    @app.exception_handler(NeverFits)
    async def never_fits(request: Request, exc: NeverFits) -> JSONResponse:
        metrics.too_large.inc()
        return _json(
            ApiError(
                413,
                f"{exc}: it can never be taken, a retry will not help; send fewer items per "
                "request, or start the server with a larger --max-queue",
                "max_queue",
            )
        )

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it; the metrics count it as 499 (nginx's code)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = {
            404: f"no route {request.url.path}: see /get_reward, /classify, /pooling, /v1/chat/completions, /v1/models, /health, /metrics",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        return _json(ApiError(exc.status_code, message, None), request.url.path)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _json(ApiError(422, "the request does not match the protocol", None), request.url.path)

    @app.exception_handler(Exception)
    async def failure(request: Request, exc: Exception) -> JSONResponse:
        log.error("scoring failed on %s: %s", request.url.path, type(exc).__name__)  # no body, no headers
        return _json(
            ApiError(500, f"the server failed to score this request ({type(exc).__name__}); see the server log", None)
        )

    @app.get("/health")
    async def health() -> Any:
        batcher = service.batcher
        read = getattr(service.engine, "read_point", None)
        backend: Any = service.backend
        down = backend.failure() if backend is not None else None
        if down is not None:
            return JSONResponse({"status": "engine down", "engine": backend.name, "reason": down}, status_code=503)
        return {
            "status": "ok",
            "engine": backend.name if backend is not None else "torch",
            "model": service.model_name,
            "kind": service.engine.kind,
            "normalize": service.normalize,
            "max_length": service.engine.max_length,
            "segments": service.segments,
            "queue_depth": batcher.depth if batcher else 0,
            **(read.describe(service.engine.tokenizer) if read is not None else {}),
        }

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(
            metrics.render(service.batcher.depth if service.batcher else 0), media_type=metrics.content_type
        )

    app.include_router(openrlhf.router(service))
    app.include_router(vllm.router(service))
    app.include_router(openai.router(service))
    return Guard(app, token, metrics)  # type: ignore[return-value]
