"""Tokenization of conversations a judge learns from (the generative approach, method sft): every turn
rendered by the layout, labels on the assistant replies, and the max_length policy (drop, or cut the
prompt from the left / the final reply from the right, keeping the special tokens). A conversation's
images count as their visual tokens (rmspec.vision.tokens.extra_positions), as pairs' do. Called by
rmspec.data.tokenize.TokenizeStage, whose ``stage`` gives the layout, the limits and the reject writer."""

from __future__ import annotations

from typing import Any

from rmspec.data.fit import CUT_PROMPT, DROP
from rmspec.vision import marks


def conversation_visual(stage: Any, batch: dict[str, list], conversations: dict[int, list[int]]) -> dict[int, int]:
    """Per live conversation with images: the positions its images add beyond their placeholders (a
    judge's images sit before its reply); a row an image of which the processor refuses is rejected."""
    if stage.visual is None or "images" not in batch:
        return {}
    from rmspec.vision.tokens import extra_positions

    rows = [i for i in conversations if batch["images"][i]]
    extra, refused = extra_positions(stage.visual, [], [], [batch["images"][i] for i in rows], stage._special_encode)
    for k, exc in refused.items():
        stage._reject(batch, rows[k], f"image_{exc.reason}", exc.detail)
    return {i: n for k, (i, n) in enumerate(zip(rows, extra)) if k not in refused}


def tokenize_conversations(stage: Any, batch: dict[str, list]) -> dict[str, list]:
    """The batch with input_ids, labels, total_tokens (visual tokens included) and truncated; rows that
    cannot fit are rejected with the reason."""
    n = len(batch["id"])
    out: dict[str, list] = {
        "input_ids": [[] for _ in range(n)],
        "labels": [[] for _ in range(n)],
        "total_tokens": [0] * n,
        "truncated": [False] * n,
    }
    turned = {i: stage.layout.turns(batch["messages"][i]) for i in range(n) if not batch["reject_reason"][i]}
    visual = conversation_visual(stage, batch, {i: [t for p in turns.pieces for t in p] for i, turns in turned.items()})
    for i, turns in turned.items():
        if batch["reject_reason"][i]:  # an image the processor refuses
            continue
        ids: list[int] = []
        labels: list[int] = []
        for piece, learn in zip(turns.pieces, turns.learn):
            ids += piece
            labels += piece if learn else [-100] * len(piece)
        # The last exchange (the final assistant header and reply) is what must survive a cut.
        last_header = len(ids) - len(turns.pieces[-1]) - (len(turns.pieces[-2]) if len(turns.pieces) > 1 else 0)
        if stage._marks_differ(batch, i, {"messages": _Ids(ids)}):
            continue
        v = visual.get(i, 0)  # the images' visual tokens count against max_length too
        limit = stage.max_tokens - v
        out["total_tokens"][i] = len(ids) + v
        if len(ids) > limit:
            over = len(ids) - limit
            head = 0
            while head < len(ids) and ids[head] in stage.layout.special_ids:
                head += 1
            if stage.policy == DROP:
                stage._reject(batch, i, "too_long", stage._over(f"{len(ids) + v} tokens > max {stage.max_tokens}", v))
                continue
            if stage.policy == CUT_PROMPT:
                if over > last_header - head:
                    needs = len(ids) - last_header + head
                    stage._reject(
                        batch,
                        i,
                        "response_too_long",
                        stage._over(f"the final reply needs {needs} tokens > max {stage.max_tokens}", v),
                    )
                    continue
                cut = ids[:head] + ids[head + over :]
                if v and marks.count(cut) < marks.count(ids):
                    stage._reject(
                        batch,
                        i,
                        "image_cut",
                        f"fitting max {stage.max_tokens} ({v} of them the images' visual tokens) cuts an image "
                        "from the conversation: raise training.max_length or lower model.vision.max_pixels",
                    )
                    continue
                ids, labels = ids[:head] + ids[head + over :], labels[:head] + labels[head + over :]
            else:
                reply = turns.pieces[-1]
                keep_tail = 0
                while keep_tail < len(reply) and reply[len(reply) - 1 - keep_tail] in stage.layout.special_ids:
                    keep_tail += 1
                if over >= len(reply) - keep_tail:
                    stage._reject(
                        batch,
                        i,
                        "prompt_too_long",
                        stage._over(f"the conversation before the reply fills max {stage.max_tokens}", v),
                    )
                    continue
                end = len(ids) - keep_tail
                ids = ids[: end - over] + ids[end:]
                labels = labels[: end - over] + labels[end:]
            out["truncated"][i] = True
        out["input_ids"][i], out["labels"][i] = ids, labels
    return {**batch, **out}


class _Ids(list):
    """A conversation's ids, as the picture-mark check reads a side (its ``ids()``)."""

    def ids(self) -> list[int]:
        return list(self)
