"""The row kinds: the shapes of canonical record the data stage writes (rmspec.data.records), one
enum read by the spec checks, the preset table (rmspec.spec.presets), the data stage, the plan and
the annotation export.

Each kind is named for the rows it holds. Its value is the name of the approach that first trained
on such rows: the value is written into data_report.json (`approach`) and into the data cache's
record layout, so it stays as it was; code compares members, never the text.
"""

from __future__ import annotations

from enum import Enum


class RowKind(str, Enum):
    PAIRS = "bradley_terry"  # prompt, chosen, rejected (margin, scores, tie)
    LIST = "listwise"  # prompt, N >= 2 responses, one score each
    SCORED = "pointwise"  # prompt, one response, one score per attribute
    MESSAGES = "generative"  # a whole conversation ending with the assistant turn to learn
    STEPS = "process"  # prompt, reasoning steps, one label per step

    def __str__(self) -> str:  # as the plain text it always was, in messages and files
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def description(self) -> str:
        """What such rows are, in a user's words (validate's messages)."""
        return DESCRIPTIONS[self]


DESCRIPTIONS = {
    RowKind.PAIRS: "preference pairs",
    RowKind.LIST: "N scored responses per prompt",
    RowKind.SCORED: "scored single responses",
    RowKind.MESSAGES: "conversations a judge learns from",
    RowKind.STEPS: "reasoning steps with step labels",
}


def describe(rows: str) -> str:
    """A row kind in a user's words; an approach's own kind of rows (not one of these) as its name."""
    return DESCRIPTIONS.get(rows, str(rows))  # type: ignore[call-overload]


# The names the rest of rmspec imports: the enum's members, under the same names.
PAIRS, LIST, SCORED, MESSAGES, STEPS = RowKind.PAIRS, RowKind.LIST, RowKind.SCORED, RowKind.MESSAGES, RowKind.STEPS
