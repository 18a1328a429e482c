"""One chosen answer and a list of rejected ones: the shape of LongRM's training pairs (LCM-Lab/Long-RM:
`chosen` and `rejects`, 4 answers) and of other best-of-n sets that keep every losing sample.

A rejected column holding a list of texts (not a conversation: that is a list of messages) is read only as the
mapping says (data.mapping.binarize), never guessed:
- all_pairs: one pair per rejected answer, each with the row's prompt and chosen answer;
- best_vs_random: one pair, its rejected answer drawn with the row's index as seed (as for UltraFeedback);
- best_vs_worst (the default) and ranked: the row is rejected (`rejected_list`), saying what to set: the rejected
  answers are not ranked among themselves, so there is no worst, and ranked lists are for approach.kind listwise.
With approach.kind listwise, the chosen and rejected columns give one ranked list: the chosen answer first, the
rejected ones tied below it (scores 1 and 0), and the prompt is computed once for the whole list. With
approach.top_k: 1 the loss is the chosen answer's softmax over all of them; without it, Breslow's rule for ties
also scores each rejected answer against the tied group, which pulls their rewards together.
"""

from __future__ import annotations

import random
from typing import Any

from rmspec.data.records import Reject
from rmspec.data.row_values import text
from rmspec.spec.data_mapping import MappingSpec

# Short enough that the whole of it shows in the one-line error of a data stage left with no rows (160 characters).
BINARIZE_HINT = "set data.mapping.binarize: all_pairs (a pair each) or best_vs_random (one), or approach.kind: listwise"


def answers(value: Any) -> list[str] | None:
    """The rejected answers when ``value`` is a list holding texts (every item must then be one: Reject naming the
    first that is not); None for anything else (a text, a conversation of messages)."""
    if value == []:  # neither answers nor a conversation: nothing to compare the chosen answer with
        raise Reject("empty", "rejected is an empty list")
    if not MappingSpec.holds_answers(value):
        return None
    return [text(v, f"rejected[{k}]") for k, v in enumerate(value)]


def rejected_picks(rejected: list[str], binarize: str, index: int) -> list[str]:
    """The rejected answers a row's pairs take (see the module's note); Reject where the mapping does not say."""
    if binarize == "all_pairs":
        return rejected
    if binarize == "best_vs_random":
        return [random.Random(index).choice(rejected)]
    raise Reject("rejected_list", f"rejected holds {len(rejected)} answers, binarize {binarize}: {BINARIZE_HINT}")


def ranked_record(prompt_messages: list[dict[str, str]], chosen: str, rejected: list[str]) -> dict[str, Any]:
    """A listwise record: the chosen answer first (score 1), the rejected ones tied below it (score 0)."""
    return {
        "prompt_messages": prompt_messages,
        "responses": [chosen, *rejected],
        "scores": [1.0] + [0.0] * len(rejected),
    }
