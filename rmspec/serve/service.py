"""The loaded model behind the HTTP protocols: batching, normalization and activation.

Every protocol module turns its request into encoded items (rmspec.inference.Encoded, or judge
prompts), awaits `score`/`generate`, and shapes the answer. Nothing here knows HTTP.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from rmspec.composite.scorer import CompositeScorer
from rmspec.inference import scorers
from rmspec.inference.encoding import Encoded
from rmspec.inference.engine import RewardEngine
from rmspec.inference.process import StepEngine
from rmspec.serve import IMAGE_URL_TIMEOUT, MAX_BODY_MB, MAX_IMAGES, MAX_ITEMS, MAX_REQUEST_MEGAPIXELS
from rmspec.serve.batcher import Batcher

SEGMENTS = ("training", "plain")


@dataclass
class Limits:
    max_body_bytes: int = int(MAX_BODY_MB * 1024 * 1024)
    max_items: int = MAX_ITEMS  # items (texts) per request
    max_queue: int = MAX_ITEMS  # items waiting across requests before 503
    max_batch_tokens: int = 16384
    max_batch_items: int = 256
    max_wait_ms: float | None = None  # None: the engine's own wait (InferenceEngine.batch_wait_ms)
    # one image's encoded bytes (rmspec.vision.images.DEFAULT_MAX_BYTES): 413 above
    max_image_bytes: int = 32 * 1024 * 1024
    allow_image_urls: bool = False  # fetch http(s) image_url parts (off: only data: URIs, 400 otherwise)
    max_images: int = MAX_IMAGES  # pictures in one request: 413 above, before any is read
    max_request_pixels: int = int(MAX_REQUEST_MEGAPIXELS * 1_000_000)  # all of a request's pictures, from headers
    image_url_timeout: float = IMAGE_URL_TIMEOUT  # one URL's whole download (rmspec.vision.fetch)
    allow_image_hosts: tuple[str, ...] = ()  # internal hosts/networks a URL may reach (else refused)

    def guard(self) -> Any:
        """The address guard of the server's downloads (rmspec.vision.fetch.Guard)."""
        from rmspec.vision.fetch import Guard

        return Guard.of(self.allow_image_hosts)


@dataclass
class Judged:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


class Service:
    def __init__(
        self,
        engine: RewardEngine | StepEngine | CompositeScorer,
        *,
        model_name: str,
        normalize: bool | None = None,
        limits: Limits | None = None,
        batch_size: int | None = None,
        segments: str = "training",
        aliases: Sequence[str] = (),
    ):
        self.engine = engine
        self.kind = scorers.of(engine)  # what it answers (rmspec.inference.scorers.base.ScorerType)
        self.model_name = model_name
        # The names a request's `model` may carry (vLLM answers any other with 404).
        self.model_names = {model_name, *aliases}
        self.limits = limits or Limits()
        # On by default when the model carries reward_mean/reward_std (OpenRLHF#822: the trainer's
        # own normalization does nothing for a remote reward model).
        self.normalize = engine.can_normalize if normalize is None else (normalize and engine.can_normalize)
        self.batch_size = batch_size or engine.batch_size
        if segments not in SEGMENTS:
            raise ValueError(f"segments must be one of {SEGMENTS}")
        self.segments = segments
        self.batcher: Batcher | None = None
        self.metrics: Any = None  # rmspec.serve.metrics.Metrics, set by the app
        from rmspec.inference.ensemble import ensemble_head

        # An ensemble (rmspec.inference.ensemble): raw outputs are [reward, member_1..member_N].
        self.ensemble = ensemble_head(getattr(engine, "model", None)) is not None
        self._image_pool: Any = None  # rmspec.serve.images: requests' pictures fetched and decoded here
        import threading

        from rmspec.serve.images import WORKERS

        # Decoded pixels the server holds for requests not answered yet (Service.pictures), at most this many.
        self.pixels_held = 0
        self.pixel_capacity = WORKERS * self.limits.max_request_pixels
        self._pixel_lock = threading.Lock()

    @contextlib.asynccontextmanager
    async def pictures(self, messages: Any, reads: bool = True) -> AsyncIterator[tuple[Any, list[Any]]]:
        """(the messages with each image part as its place, the decoded pictures), read off the event
        loop (rmspec.serve.chat.image_conversation); their pixels count against the server's capacity
        from their headers, before decoding, until the request is answered (the block ends): a request
        that would pass it is a 503 + Retry-After, as a full queue is. `reads` false (a model that
        reads no images): the messages as they came, no pictures."""
        from rmspec.serve.chat import image_conversation
        from rmspec.serve.request_io import ApiError

        if not reads:
            yield messages, []
            return
        held = 0

        def reserve(pixels: int) -> None:
            nonlocal held
            with self._pixel_lock:
                if self.pixels_held and self.pixels_held + pixels > self.pixel_capacity:
                    raise ApiError(
                        503,
                        f"the server is busy: it holds {self.pixels_held:,} decoded pixels of other requests' "
                        f"images (capacity {self.pixel_capacity:,}: 4 x --max-request-megapixels); retry shortly",
                        "messages",
                        {"Retry-After": "1"},
                    )
                self.pixels_held += pixels
                held = pixels

        try:
            yield await self.off_loop(image_conversation, messages, self.limits, "messages", reserve)
        finally:
            with self._pixel_lock:
                self.pixels_held -= held

    async def off_loop(self, work: Any, *args: Any) -> Any:
        """`work(*args)` in the image pool (rmspec.serve.images.WORKERS threads), not on the event loop."""
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        from rmspec.serve.images import WORKERS

        if self._image_pool is None:
            self._image_pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="rmspec-images")
        return await asyncio.get_running_loop().run_in_executor(self._image_pool, work, *args)

    @property
    def answering_route(self) -> str:
        """The route (and request shape) this server's model answers, for a 400 on a route it does not."""
        if self.kind.generates:
            return "POST /v1/chat/completions"
        if self.kind.per_token:
            return 'POST /pooling with "task": "token_classify"'
        if self.kind.scores_rows:
            return "POST /get_reward (query, prompts, labels)"
        if self.kind.reads_images:
            return 'POST /classify or /pooling with "messages" whose user content holds image_url parts'
        return "POST /classify, /pooling or /get_reward"

    @property
    def is_judge(self) -> bool:
        """A generative judge: OpenAI chat completions only."""
        return self.kind.generates

    @property
    def backend(self) -> Any:
        """The engine rmspec started for the scorer (vLLM: rmspec serve --engine vllm), or None where the
        scorer computes with torch in this process."""
        return getattr(self.engine, "backend", None)

    @property
    def batch_wait_ms(self) -> float:
        """How long the first request of a dynamic batch waits for others: --max-wait-ms, else the engine's."""
        from rmspec.inference.engine_base import TorchEngine

        if self.limits.max_wait_ms is not None:
            return self.limits.max_wait_ms
        return float(self.backend.batch_wait_ms if self.backend is not None else TorchEngine.batch_wait_ms)

    def make_batcher(self, on_batch=None) -> Batcher:
        lim = self.limits
        run = self._generate_batch if self.is_judge else self._score_batch
        cost = (lambda item: len(item[0]) + item[1]) if self.is_judge else (lambda e: len(e.ids))
        self.batcher = Batcher(
            run,
            cost,
            max_batch_tokens=lim.max_batch_tokens,
            max_batch_items=lim.max_batch_items,
            max_wait=self.batch_wait_ms / 1000.0,
            max_queue=lim.max_queue,
            on_batch=on_batch,
            chunk=self.batch_size,
            batches_at_once=self.backend.batches_at_once if self.backend is not None else 1,
        )
        return self.batcher

    def check_model(self, name: str | None) -> str:
        """The model name to answer with; a name this server does not serve is a 404 (as vLLM)."""
        if name is None:
            return self.model_name
        if name not in self.model_names:
            from rmspec.serve.request_io import ApiError

            raise ApiError(
                404,
                f"The model `{name}`"[:300] + f" does not exist: this server serves `{self.model_name}` "
                "(GET /v1/models; rmspec serve --served-model-name NAME to add a name)",
                "model",
            )
        return name

    # ------------------------------------------------------------------ reward models

    def _score_batch(self, items: list[Encoded]) -> list[Any]:  # a PRM: [tokens][labels] per item
        return self.engine.outputs(items, batch_size=self.batch_size)

    @property
    def is_process(self) -> bool:
        """Per-token outputs (a process reward model): vLLM /pooling with task token_classify only."""
        return self.kind.per_token

    @property
    def is_composite(self) -> bool:
        """Rules, judges and models combined (rmspec.serve.composite answers /get_reward)."""
        return self.kind.scores_rows

    def served(self, encoded: Encoded) -> Encoded:
        """A served text's encoding with the chosen encoder segment ids: `training` keeps the
        training layout's (prompt 0, response 1 after the first separator), `plain` gives none
        (all 0, as `model(**tokenizer(text))`, OpenRLHF's own server and vLLM)."""
        if self.segments == "plain" and encoded.type_ids is not None:
            return encoded._replace(type_ids=None)
        return encoded

    async def score(self, encoded: Sequence[Encoded], per_token: bool = False, request: Any = None) -> list[list[Any]]:
        """Every raw head output per item (floats), computed in shared batches (a process reward model:
        per token, [tokens][labels] lists, and only for vLLM's /pooling with task token_classify).
        With `request`, the work is dropped if its client disconnects (ClientGone)."""
        assert self.batcher is not None
        if self.is_process and not per_token:
            from rmspec.serve.request_io import ApiError

            raise ApiError(
                400,
                "this server holds a process reward model (a score per step): "
                'POST /pooling with "task": "token_classify"',
                "task",
            )
        if self.metrics is not None:
            self.metrics.truncated.inc(sum(1 for e in encoded if e.truncated))
        return await self._submit(list(encoded), request)

    async def _submit(self, items: list[Any], request: Any) -> list[Any]:
        assert self.batcher is not None
        if request is None:
            return await self.batcher.submit(items)
        from rmspec.serve.request_io import ClientGone, unless_disconnected

        try:
            return await unless_disconnected(request, self.batcher.submit(items))
        except ClientGone:
            if self.metrics is not None:
                self.metrics.cancelled.inc()
            raise

    def present(self, values: list[float]) -> list[float]:
        """What the server answers: a reward model's reward normalized when normalization is on (an
        ensemble's members stay out: `reward_std` carries them)."""
        if self.ensemble:
            values = values[:1]
        if self.normalize and self.kind.normalizes:
            reward = self.engine.normalize(values[0])
            assert reward is not None, "normalize is on only where engine.can_normalize"
            return [reward, *values[1:]]
        return list(values)

    def reward_std(self, raw: list[list[float]]) -> list[float] | None:
        """An ensemble's members' std per item (None for other models), from the raw outputs."""
        if not self.ensemble:
            return None
        from rmspec.inference.ensemble import member_std

        return [member_std(v) or 0.0 for v in raw]

    # ------------------------------------------------------------------ judges

    @property
    def context_length(self) -> int:
        """Prompt + reply tokens the judge can hold (its position limit)."""
        from rmspec.inference.loading import max_length_for

        return max_length_for(self.engine.model, self.engine.tokenizer)

    def _generate_batch(self, items: list[tuple[list[int], int, list[Any]]]) -> list[Judged]:
        """(prompt ids, budget, images) per item: a VLM judge reads each prompt with its images."""
        from rmspec.inference.judge import generate_request_ids, generated_length

        tok = self.engine.tokenizer
        stops = _stop_ids(self.engine)
        out: list[Judged | None] = [None] * len(items)
        for budget in sorted({item[1] for item in items}):  # one generate call per requested max_tokens
            idx = [i for i, item in enumerate(items) if item[1] == budget]
            generated = generate_request_ids(
                self.engine.model,
                tok,
                [items[i][0] for i in idx],
                [items[i][2] for i in idx],
                budget,
                self.batch_size,
                getattr(self.engine, "encoder", None),
            )
            for i, ids in zip(idx, generated):
                # Usage and finish reason from the generated tokens themselves: up to and with the
                # first stop token ("stop"), else the whole budget ("length").
                n, stopped = generated_length(ids, stops)
                text = tok.decode(ids[:n], skip_special_tokens=True)
                out[i] = Judged(text, len(items[i][0]), n, "stop" if stopped else "length")
        return out  # type: ignore[return-value]

    async def generate(
        self,
        conversations: Sequence[Sequence[dict[str, str]]],
        max_new_tokens: int | None,
        request: Any = None,
        images: Sequence[list[Any]] | None = None,
    ) -> list[Judged]:
        """Greedy replies; `max_new_tokens` up to the context left after the prompt, else a 400.
        `images`: each conversation's pictures, where its `<image>` placeholders stand (a VLM judge)."""
        from rmspec.serve.request_io import ApiError

        assert self.batcher is not None
        engine: Any = self.engine  # a judge (rmspec.inference.scorers.judge.JudgeEngine)
        assert self.is_judge  # the protocols send only a judge's requests here
        ids = engine.judge_prompt_ids(conversations)
        context = self.context_length
        longest = max(len(x) for x in ids)
        if max_new_tokens is not None and longest + max_new_tokens > context:
            raise ApiError(
                400,
                f"This model's maximum context length is {context} tokens. However, you requested "
                f"{longest + max_new_tokens} tokens ({longest} in the messages, {max_new_tokens} in the "
                f"completion). Please reduce the length of the messages or completion.",
                "max_tokens",
            )
        budget = max_new_tokens or min(engine.max_new_tokens, max(1, context - longest))
        pictures = list(images) if images is not None else [[] for _ in ids]
        return await self._submit([(x, budget, p) for x, p in zip(ids, pictures)], request)


def _stop_ids(engine: Any) -> set[int]:
    """The tokens that end a judge's reply: the generation config's EOS ids and the tokenizer's."""
    stops = set()
    config = getattr(engine.model, "generation_config", None)
    for source in (getattr(config, "eos_token_id", None), getattr(engine.tokenizer, "eos_token_id", None)):
        if isinstance(source, int):
            stops.add(source)
        elif isinstance(source, (list, tuple)):
            stops.update(t for t in source if isinstance(t, int))
    return stops


def activation(values: list[float]) -> list[float]:
    """vLLM's classify activation: sigmoid for one output, softmax for several."""
    if len(values) == 1:
        v = values[0]
        return [1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))]
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]
