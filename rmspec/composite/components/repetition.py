"""`repetition`: an n-gram repetition penalty (Open-R1's / TRL's): over the response's lowercased
whitespace words, (1 - distinct n-grams / n-grams) x max_penalty; 0 for a response shorter than n."""

from __future__ import annotations

from collections.abc import Sequence

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome, ok
from rmspec.spec.composite_rules import RepetitionRule


def repetition_penalty(text: str, n: int, max_penalty: float) -> float:
    words = text.lower().split()
    if len(words) < n:
        return 0.0
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return (1.0 - len(set(grams)) / len(grams)) * max_penalty


class Repetition:
    needs_reference = False

    def __init__(self, settings: RepetitionRule):
        self.n, self.max_penalty = settings.ngram, settings.max_penalty

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        return [ok(repetition_penalty(item.response, self.n, self.max_penalty)) for item in items]


def build(settings: RepetitionRule, context: Context) -> Repetition:
    return Repetition(settings)
