"""`regex`: 1 when the response matches the pattern (fully, or anywhere), else 0."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome, ok
from rmspec.spec.composite_rules import RegexRule


class Regex:
    needs_reference = False

    def __init__(self, settings: RegexRule):
        self.compiled = re.compile(settings.pattern, re.DOTALL if settings.dotall else 0)
        self.find = self.compiled.fullmatch if settings.match == "full" else self.compiled.search

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        return [ok(1.0 if self.find(item.response) else 0.0) for item in items]


def build(settings: RegexRule, context: Context) -> Regex:
    return Regex(settings)
