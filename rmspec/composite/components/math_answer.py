"""`math_answer`: the response's final answer checked against the reference with math-verify.

1 or 0 when both sides parse and compare; else a failure: `no_reference` (the row has none),
`parse_error` (no answer could be read, or math-verify raised), `timeout` (past `timeout_s`).
The check runs in the math-verify pool (rmspec.composite.mathpool), gold first.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmspec.composite.components.context import Context
from rmspec.composite.components.reference import reference_text
from rmspec.composite.outcome import Item, Outcome, failed
from rmspec.spec.composite_rules import MathAnswer


class MathAnswerRule:
    needs_reference = True

    def __init__(self, settings: MathAnswer, context: Context):
        self.limit_s = settings.timeout_s
        self.context = context

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        out: list[Outcome | None] = [None] * len(items)
        todo: list[tuple[int, str, str]] = []
        for i, item in enumerate(items):
            gold = reference_text(item.reference)
            if gold is None:
                out[i] = failed("no_reference", "the row has no reference answer (columns.label)")
            else:
                todo.append((i, gold, item.response))
        if todo:
            checked = self.context.math_pool(self.limit_s).check_many([(g, a) for _, g, a in todo], self.limit_s)
            for (i, _, _), outcome in zip(todo, checked):
                out[i] = outcome
        return out  # type: ignore[return-value]  # every index is filled above


def build(settings: MathAnswer, context: Context) -> MathAnswerRule:
    return MathAnswerRule(settings, context)
