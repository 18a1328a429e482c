"""`length`: a reward on the response's length in tokens of a named tokenizer.

overlong (DAPO's soft overlong punishment, with L the length, L_max = max_tokens and
L_cache = cache_tokens): 0 if L <= L_max - L_cache; ((L_max - L_cache) - L) / L_cache up to L_max;
-1 beyond. target: -|L - target| / target, floored at -1.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome, ok
from rmspec.spec.composite_rules import LengthRule


def overlong_penalty(length: int, max_tokens: int, cache_tokens: int) -> float:
    expected = max_tokens - cache_tokens
    if length <= expected:
        return 0.0
    if length <= max_tokens:
        return (expected - length) / cache_tokens
    return -1.0


def target_penalty(length: int, target: int) -> float:
    return max(-1.0, -abs(length - target) / target)


class Length:
    needs_reference = False

    def __init__(self, settings: LengthRule, tokenizer: Any):
        self.settings, self.tokenizer = settings, tokenizer
        # A fast tokenizer called from several server threads at once can fail ("Already borrowed").
        self.lock = threading.Lock()

    def count(self, texts: Sequence[str]) -> list[int]:
        with self.lock:
            return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        s = self.settings
        lengths = self.count([item.response for item in items]) if items else []
        if s.mode == "overlong":
            assert s.max_tokens is not None and s.cache_tokens is not None  # the spec checks it
            return [ok(overlong_penalty(n, s.max_tokens, s.cache_tokens)) for n in lengths]
        assert s.target_tokens is not None
        return [ok(target_penalty(n, s.target_tokens)) for n in lengths]


def build(settings: LengthRule, context: Context) -> Length:
    from transformers import AutoTokenizer

    from rmspec.packaged import resolve_model_path

    local = context.resolve(settings.tokenizer)
    name = str(local) if local.exists() else resolve_model_path(settings.tokenizer, context.base_dir)
    return Length(settings, AutoTokenizer.from_pretrained(name))
