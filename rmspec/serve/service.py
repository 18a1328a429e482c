"""The loaded model behind the HTTP protocols: batching, normalization and activation.

Every protocol module turns its request into encoded items (rmspec.inference.Encoded, or judge
prompts), awaits `score`/`generate`, and shapes the answer. Nothing here knows HTTP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from rmspec.inference.encoding import Encoded
from rmspec.inference.engine import RewardEngine
from rmspec.inference.scorer import ScorerKind
from rmspec.serve.batcher import Batcher


@dataclass
class Limits:
    max_body_bytes: int = 16 * 1024 * 1024
    max_items: int = 1024  # items (texts) per request
    max_queue: int = 4096  # items waiting across requests before 503
    max_batch_tokens: int = 16384
    max_batch_items: int = 256
    max_wait_ms: float = 5.0


@dataclass
class Judged:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


class Service:
    def __init__(self, engine: RewardEngine, *, model_name: str, normalize: bool | None = None,
                 limits: Limits | None = None, batch_size: int | None = None):
        self.engine = engine
        self.model_name = model_name
        self.limits = limits or Limits()
        # On by default when the model carries reward_mean/reward_std (OpenRLHF#822: the trainer's
        # own normalization does nothing for a remote reward model).
        self.normalize = engine.can_normalize if normalize is None else (normalize and engine.can_normalize)
        self.batch_size = batch_size or engine.batch_size
        self.batcher: Batcher | None = None

    @property
    def is_judge(self) -> bool:
        return self.engine.kind == ScorerKind.JUDGE

    def make_batcher(self, on_batch=None) -> Batcher:
        lim = self.limits
        run = self._generate_batch if self.is_judge else self._score_batch
        cost = (lambda item: len(item[0]) + item[1]) if self.is_judge else (lambda e: len(e.ids))
        self.batcher = Batcher(run, cost, max_batch_tokens=lim.max_batch_tokens, max_batch_items=lim.max_batch_items,
                               max_wait=lim.max_wait_ms / 1000.0, max_queue=lim.max_queue, on_batch=on_batch)
        return self.batcher

    # ------------------------------------------------------------------ reward models

    def _score_batch(self, items: list[Encoded]) -> list[list[float]]:
        return self.engine.outputs(items, batch_size=self.batch_size)

    @property
    def is_process(self) -> bool:
        return self.engine.kind == ScorerKind.PROCESS

    async def score(self, encoded: Sequence[Encoded], per_token: bool = False) -> list[list[float]]:
        """Every raw head output per item, computed in shared batches (a process reward model:
        per token, [tokens][labels], and only for vLLM's /pooling with task token_classify)."""
        assert self.batcher is not None
        if self.is_process and not per_token:
            from rmspec.serve.request_io import ApiError

            raise ApiError(400, "this server holds a process reward model (a score per step): "
                                "POST /pooling with \"task\": \"token_classify\"", "task")
        return await self.batcher.submit(list(encoded))

    def present(self, values: list[float]) -> list[float]:
        """What the server answers: a reward model's reward normalized when normalization is on."""
        if self.normalize and self.engine.kind == ScorerKind.REWARD:
            return [self.engine.normalize(values[0]), *values[1:]]
        return list(values)

    # ------------------------------------------------------------------ judges

    def _generate_batch(self, items: list[tuple[list[int], int]]) -> list[Judged]:
        from rmspec.inference.judge import generate

        tok = self.engine.tokenizer
        out: list[Judged | None] = [None] * len(items)
        for budget in sorted({n for _, n in items}):  # one generate call per requested max_tokens
            idx = [i for i, (_, n) in enumerate(items) if n == budget]
            texts = generate(self.engine.model, tok, [items[i][0] for i in idx], budget, self.batch_size)
            for i, text in zip(idx, texts):
                n = len(tok(text, add_special_tokens=False)["input_ids"])
                out[i] = Judged(text, len(items[i][0]), n, "length" if n >= budget else "stop")
        return out  # type: ignore[return-value]

    async def generate(self, conversations: Sequence[Sequence[dict[str, str]]], max_new_tokens: int | None) -> list[Judged]:
        assert self.batcher is not None
        ids = self.engine.judge_prompt_ids(conversations)
        budget = min(max_new_tokens or self.engine.max_new_tokens, self.engine.max_new_tokens * 16)
        return await self.batcher.submit([(x, budget) for x in ids])


def activation(values: list[float]) -> list[float]:
    """vLLM's classify activation: sigmoid for one output, softmax for several."""
    if len(values) == 1:
        v = values[0]
        return [1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))]
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]
