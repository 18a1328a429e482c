"""Where the reward is read: one rule for a text that arrives already formatted (`rmspec serve`).

Training, `rmspec eval` and `rmspec score` lay a conversation out with the data pipeline's layout
(rmspec.data.layout), and the reward is read at its last token: the end of the layout's `tail`
(ChatML: `<|im_end|>\\n`; Llama-3: `<|eot_id|>`; an encoder pair: `[SEP]`; the plain layout: EOS).
RL trainers send the same conversation as text or token ids, ending a little differently:
OpenRLHF decodes prompt + response + EOS, so a ChatML query ends in `<|im_end|>` without the
newline; some add an EOS or padding after a complete turn; verl strips the BOS text and lets the
server's `add_special_tokens` add it back.

The rule, applied to served token ids (`ReadPoint.canonical`), so a complete conversation is read
where training read it:

1. trailing filler (EOS and pad tokens) after a complete tail is dropped: the sequence ends
   with the tail, as trained;
2. a sequence that ends in a proper beginning of the tail that starts with a special token
   (ChatML's `<|im_end|>` without its `\\n`), possibly followed by filler, gets the rest of the
   tail;
3. a sequence recognized by 1 or 2 starts with the layout's fixed head (BOS, `[CLS]`) exactly
   once: a missing head is added, a doubled one removed.

Anything else (a text that does not end a turn as the template does) is scored as sent, as vLLM
would. The tail and head are read off the layout itself by encoding two probe conversations, so
this rule cannot drift from what training does; a template whose tail differs between the probes
gets no rewriting at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PROBES = (
    ([{"role": "user", "content": "Is the sky blue?"}], "Yes, on a clear day."),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}], "4"),
)


@dataclass(frozen=True)
class ReadPoint:
    tail: tuple[int, ...] = ()  # the layout's closing tokens; the reward is read at the last one
    head: tuple[int, ...] = ()  # the fixed leading special tokens (BOS, [CLS]), or none
    filler: frozenset[int] = field(default_factory=frozenset)  # EOS and pad: never read after a tail
    special: frozenset[int] = field(default_factory=frozenset)

    @classmethod
    def of(cls, layout: Any, tokenizer: Any) -> ReadPoint:
        """The rule for this layout (rmspec.data.layout.Layout) and tokenizer."""
        from rmspec.data.layout import PAIR, PLAIN, TEMPLATE

        special = frozenset(getattr(layout, "special_ids", ()) or ())
        filler = frozenset(
            t
            for t in (getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None))
            if isinstance(t, int)
        )
        kind = getattr(layout, "kind", None)
        if kind == PAIR:
            return cls(tuple(layout.pair_tail), tuple(layout.pair_head), filler, special)
        if kind == PLAIN:
            return cls(tuple(layout.plain_tail), tuple(layout.single_head), filler, special)
        if kind != TEMPLATE:
            return cls()
        try:
            segs = [layout.segments([messages], [reply])[0] for messages, reply in PROBES]
        except Exception:  # a template that refuses the probes (e.g. no system turn): try one probe
            try:
                segs = [layout.segments([PROBES[0][0]], [PROBES[0][1]])[0]]
            except Exception:
                return cls()
        tails = {tuple(s.tail) for s in segs}
        if len(tails) != 1:
            return cls()
        bos = getattr(tokenizer, "bos_token_id", None)
        head = (bos,) if bos is not None and all(s.ids()[:1] == [bos] for s in segs) else ()
        return cls(tails.pop(), head, filler, special)

    # ------------------------------------------------------------------ the rule

    def canonical(self, ids: Sequence[int]) -> list[int]:
        """`ids` as training lays out the same conversation, or unchanged if it is not one."""
        ids = list(ids)
        end = self._complete_end(ids)
        if end is None:
            return ids
        if self.head:
            h = len(self.head)
            while tuple(end[: 2 * h]) == self.head * 2:
                end = end[h:]
            if tuple(end[:h]) != self.head:
                end = list(self.head) + end
        return end

    def _complete_end(self, ids: list[int]) -> list[int] | None:
        tail = list(self.tail)
        if not tail or not ids:
            return None
        # 1. a complete tail, after dropping as much trailing filler as still leaves one
        best, j = None, len(ids)
        while j > 0:
            if j >= len(tail) and ids[j - len(tail) : j] == tail:
                best = j
            if ids[j - 1] not in self.filler:
                break
            j -= 1
        if best is not None:
            return ids[:best]
        # 2. a proper beginning of the tail that starts with a special token (the end-of-turn mark)
        if tail[0] not in self.special:
            return None
        #    (again after as much trailing filler as still leaves one: the EOS may be the mark itself)
        found, j = None, len(ids)
        while j > 0:
            k = next((k for k in range(len(tail) - 1, 0, -1) if j >= k and ids[j - k : j] == tail[:k]), None)
            if k is not None:
                found = (j, k)
            if ids[j - 1] not in self.filler:
                break
            j -= 1
        if found is None:
            return None
        j, k = found
        return ids[:j] + tail[k:]

    def with_specials(self, ids: Sequence[int], head: Sequence[int], tail: Sequence[int]) -> list[int]:
        """`add_special_tokens=True` (vLLM's default) without doubling what the text already holds:
        the tokenizer's head and tail are added only where the text does not start/end with them."""
        ids, head, tail = list(ids), list(head), list(tail)
        front = [] if head and ids[: len(head)] == head else head
        back = [] if tail and len(ids) >= len(tail) and ids[len(ids) - len(tail) :] == tail else tail
        return front + ids + back

    def describe(self, tokenizer: Any) -> dict[str, Any]:
        """The rule's tokens as text (for /health and the server's start line)."""
        show = lambda ids: tokenizer.decode(list(ids), skip_special_tokens=False) if ids else ""  # noqa: E731
        return {"reward_read_after": show(self.tail), "head": show(self.head)}
