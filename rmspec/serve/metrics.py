"""Prometheus metrics of one server: requests, latency, batch sizes, queue depth, truncated texts,
refusals (503 queue full, 413 too large) and work dropped for clients that disconnected.

Each app gets its own registry (several servers can live in one test process). Routes are
labelled by their known path; anything else is `other`, so random paths cannot grow the label set.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, routes: set[str]):
        self.routes = routes
        self.registry = r = CollectorRegistry()
        self.requests = Counter("rmspec_requests", "HTTP requests by route and status", ["route", "status"], registry=r)
        self.latency = Histogram(
            "rmspec_request_latency_seconds", "Request latency by route", ["route"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.items = Counter("rmspec_items_scored", "Texts scored or generated", registry=r)
        self.batch_items = Histogram(
            "rmspec_batch_size_items", "Items per model batch", buckets=SIZE_BUCKETS, registry=r
        )
        self.batch_tokens = Histogram(
            "rmspec_batch_tokens",
            "Tokens per model batch",
            buckets=(64, 256, 1024, 4096, 8192, 16384, 32768, 65536),
            registry=r,
        )
        self.batch_seconds = Histogram(
            "rmspec_batch_seconds", "Model time per batch", buckets=LATENCY_BUCKETS, registry=r
        )
        self.queue_depth = Gauge("rmspec_queue_depth", "Items waiting for a batch", registry=r)
        self.truncated = Counter("rmspec_truncated", "Texts cut to max_length", registry=r)
        self.rejected_full = Counter("rmspec_queue_full", "Requests refused with 503 (queue full)", registry=r)
        self.too_large = Counter(
            "rmspec_too_large", "Requests refused with 413 (body, items or queue limit)", registry=r
        )
        self.cancelled = Counter(
            "rmspec_cancelled_requests", "Requests whose client disconnected before the answer", registry=r
        )
        self.cancelled_items = Counter(
            "rmspec_cancelled_items", "Queued texts dropped because their client disconnected", registry=r
        )

    def route(self, path: str) -> str:
        return path if path in self.routes else "other"

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        route = self.route(path)
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def observe_batch(self, items: int, tokens: int, seconds: float) -> None:
        self.items.inc(items)
        self.batch_items.observe(items)
        self.batch_tokens.observe(tokens)
        self.batch_seconds.observe(seconds)

    def render(self, queue_depth: int) -> bytes:
        self.queue_depth.set(queue_depth)
        return generate_latest(self.registry)
