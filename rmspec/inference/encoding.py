"""Encode (prompt, response) items exactly as the data pipeline encodes training data.

- The layout is the data pipeline's (rmspec.data.layout): the tokenizer's chat template when it
  has one, an encoder's text pair ([CLS] prompt [SEP] response [SEP]) otherwise, else
  "User: ...\\n\\nAssistant: ..." + EOS.
- Over-long inputs lose the start of the prompt first; the closing tokens always stay, so the
  reward is read at the end of the response.
- Encoders get segment ids (prompt 0, response 1), as training passes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

Prompt = str | list[dict[str, str]]


def as_messages(prompt: Prompt) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]


def make_layout(
    tokenizer: Any, chat_template: str = "auto", architecture: str | None = None, pictures: bool = False
) -> Any:
    """The data pipeline's layout for this tokenizer, so benchmarks are formatted as training data is;
    ``pictures`` for a vision-language model (each picture's place one id, rmspec.vision.marks)."""
    from rmspec.data.layout import Layout

    return Layout(tokenizer, chat_template, architecture, pictures)


class Encoded(NamedTuple):
    """One sequence as the model reads it: token ids and, for encoders, segment ids (prompt 0, response 1)."""

    ids: list[int]
    type_ids: list[int] | None = None
    truncated: bool = False  # the text was longer than max_length and lost tokens


def encode_many(
    tokenizer: Any, items: Sequence[tuple[Prompt, str]], max_length: int, layout: Any = None
) -> list[Encoded]:
    """(prompt, response) items as the model reads them (rmspec.data's layout and cut).

    Too long: the prompt is cut from the left; if the response alone does not fit, its end is cut
    (the closing special tokens always stay, so the reward is read at the end of the response).
    Segment ids come along for encoders because training passes them: scoring without them
    would give a different reward for the same text.
    """
    from rmspec.data.fit import CUT_PROMPT, CUT_RESPONSE, fit

    if not items:
        return []
    layout = layout or make_layout(tokenizer)
    segments = layout.segments([as_messages(p) for p, _ in items], [r for _, r in items])
    out = []
    for seg in segments:
        cut = len(seg) > max_length
        fitted, _, _ = fit(seg, max_length, CUT_PROMPT)
        if fitted is None:
            fitted, _, _ = fit(seg, max_length, CUT_RESPONSE)
        if fitted is not None:
            out.append(Encoded(fitted.ids(), fitted.type_ids(), cut))
        else:
            types = seg.type_ids()
            out.append(Encoded(seg.ids()[-max_length:], types[-max_length:] if types is not None else None, cut))
    return out


def encode(tokenizer: Any, prompt: Prompt, response: str, max_length: int, layout: Any = None) -> Encoded:
    return encode_many(tokenizer, [(prompt, response)], max_length, layout)[0]
