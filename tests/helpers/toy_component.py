"""A composite component kind from outside rmspec, in one module: its settings and how it scores.

`word_count` gives `per_word` x the number of whitespace words in the response (a length reward
counted in words, no tokenizer). Registered by one line,
`rmspec.composite.components.register("helpers.toy_component")` (tests/test_toy_component.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from rmspec.composite.outcome import Item, Outcome, ok
from rmspec.spec.composite_component import ComponentBase


class WordCount(ComponentBase):
    """per_word x the response's whitespace words."""

    kind: Literal["word_count"]
    per_word: float = Field(0.1, description="The reward per word of the response.")


SETTINGS = WordCount


class Count:
    needs_reference = False

    def __init__(self, settings: WordCount):
        self.per_word = settings.per_word

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        return [ok(self.per_word * len(item.response.split())) for item in items]


def build(settings: WordCount, context: Any) -> Count:
    return Count(settings)
