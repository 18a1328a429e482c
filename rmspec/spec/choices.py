"""Closed lists selected by `kind:` and the did-you-mean that goes with them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    choices = [str(c) for c in choices]
    word = str(word)
    # difflib's ratio is quadratic in the lengths; a word over three times as long as every choice
    # cannot reach the 0.6 cutoff anyway (ratio <= 2*shorter/(sum of lengths) < 0.5), so it is not
    # compared at all.
    longest = max((len(c) for c in choices), default=0)
    if not choices or len(word) > 3 * longest:
        return None
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return match[0] if match else None


def unknown_choice(what: str, got: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    text = f"unknown {what} {got!r} (expected one of: {', '.join(choices)})"
    guess = did_you_mean(got, choices)
    if guess:
        text += f"; did you mean {guess!r}?"
    return text
