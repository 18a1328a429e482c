"""Tokenization and the `max_length` filter: the one stage that knows about tokens.

Rows are tokenized in batches (`datasets.map(batched=True)`); an over-long row is dropped,
or cut by its policy, and every cut keeps the special tokens at the end so that the last token
is still the end of the response. A pair that the cut made identical leaves with its own reason.

A row with images (rmspec.vision.rows) holds one picture mark per image in its prompt (rmspec.vision.marks:
the layout encodes each as the id PICTURE_ID, which no text encodes to); the model reads
each image as its visual tokens instead (rmspec.vision.tokens.VisualCount, from the image's size and
the processor's settings, model.vision's bounds included). Those count against max_length like any
token: the text's budget is max_length minus what the images add, the policy applies to the text as
for a text row, and the lengths this stage records include them. A prompt cut that would remove an
image's mark rejects the row (``image_cut``): the collator could no longer match images to
their places. A side whose marks and the row's images differ in number (a U+FFFC typed in the text)
is rejected as ``image_mark_in_text``.
"""

from __future__ import annotations

from typing import Any

from rmspec.data.conversations import tokenize_conversations
from rmspec.data.fit import CUT_PROMPT, fit
from rmspec.data.layout import PAIR, Layout
from rmspec.data.ranked import ranked_columns, tokenize_ranked
from rmspec.data.tool_store import restored_batch
from rmspec.spec.row_kinds import RowKind
from rmspec.vision import marks
from rmspec.vision.images import IMAGE_PLACEHOLDER


def visual_count(model_dir: Any, vision: Any = None, tokenizer: Any = None) -> Any:
    """How this stage counts a row's images for the model in ``model_dir``: the Qwen2-VL rule where it
    applies (rmspec.vision.tokens.VisualCount: exact and cheap), else, for a vision-language model and
    with the run's ``tokenizer``, its processor's own expansion per image size
    (rmspec.vision.measured.MeasuredCount); None for text models (or a folder not on disk)."""
    import json
    from pathlib import Path

    from rmspec.vision import tokens
    from rmspec.vision.processor import IMAGE_TEXT

    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8")) if model_dir else {}
    except (OSError, ValueError):
        config = {}
    model_type = str(config.get("model_type", ""))
    if not model_type or model_type in tokens.RULE_TYPES:
        rule = tokens.visual_count(model_dir, vision, IMAGE_TEXT.get(model_type, tokens.QWEN_IMAGE_TEXT))
        if rule is not None:
            return rule
    if "vision_config" not in config or tokenizer is None:
        return None
    from rmspec.vision.measured import MeasuredCount

    image_text = IMAGE_TEXT.get(model_type) or getattr(tokenizer, "image_token", None) or IMAGE_PLACEHOLDER
    return MeasuredCount(
        str(model_dir),
        model_type,
        tokenizer,
        image_text,
        getattr(vision, "min_pixels", None),
        getattr(vision, "max_pixels", None),
        config.get("image_token_id", config.get("image_token_index")),
        image_processor=getattr(vision, "image_processor", None) or None,
    )


def reads_pictures(model_dir: Any) -> bool:
    """Whether the model in ``model_dir`` is a vision-language model (its config.json has a vision tower):
    its layout encodes each picture's place as rmspec.vision.marks.PICTURE_ID."""
    import json
    from pathlib import Path

    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8")) if model_dir else {}
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "vision_config" in config


def token_columns(approach: str, layout: Layout) -> dict[str, Any]:
    """Arrow types of the columns this stage adds."""
    from datasets import List, Value

    ids = List(Value("int32"))
    if approach == RowKind.PAIRS:
        cols = {
            "prompt": Value("string"),
            "chosen_input_ids": ids,
            "rejected_input_ids": ids,
            "prompt_tokens": Value("int32"),
            "chosen_tokens": Value("int32"),
            "rejected_tokens": Value("int32"),
            "chosen_length": Value("int32"),
            "rejected_length": Value("int32"),
            "truncated": Value("bool"),
            "shared_prefix_cut": Value("bool"),
        }
        if layout.kind == PAIR and layout.pair_types is not None:
            cols.update({"chosen_token_type_ids": List(Value("int8")), "rejected_token_type_ids": List(Value("int8"))})
    elif approach == RowKind.SCORED:
        cols = {
            "prompt": Value("string"),
            "input_ids": ids,
            "prompt_tokens": Value("int32"),
            "response_tokens": Value("int32"),
            "length": Value("int32"),
            "truncated": Value("bool"),
        }
        if layout.kind == PAIR and layout.pair_types is not None:
            cols["token_type_ids"] = List(Value("int8"))
    elif approach == RowKind.LIST:
        cols = ranked_columns(layout.kind == PAIR and layout.pair_types is not None)
    elif approach == RowKind.STEPS:
        from rmspec.data.steps import process_columns

        cols = process_columns(layout)
    else:
        cols = {
            "input_ids": ids,
            "labels": List(Value("int32")),
            "total_tokens": Value("int32"),
            "truncated": Value("bool"),
        }
    return cols


def shared_prefix_cut(chosen_len: int, rejected_len: int, limit: int, cut: int | None) -> bool:
    """Whether the pair's one prompt cut (``cut`` tokens, sized so that the longer sequence fits)
    takes more prompt from the shorter sequence than cutting it on its own would have (``max(0,
    len - limit)``). The data report counts these pairs: the cost of both sides (and the packed
    row ``[prefix | chosen | rejected]``) answering the same prompt."""
    if not cut:
        return False
    return max(0, min(chosen_len, rejected_len) - limit) < cut


class TokenizeStage:
    """Callable for `datasets.map(batched=True)`: adds token columns, rejects what cannot fit."""

    def __init__(
        self,
        layout: Layout,
        approach: str,
        max_tokens: int,
        policy: str,
        stage: str = "filter:max_length",
        step_separator: str | None = None,
        visual: Any = None,  # rmspec.vision.tokens.VisualCount: rows with images count their visual tokens
    ):
        self.layout = layout
        self.visual = visual
        self.step_separator = step_separator
        self.approach = approach
        self.max_tokens = max_tokens
        self.policy = policy
        self.stage = stage
        self.types = layout.kind == PAIR and layout.pair_types is not None

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        # tool calls and results back into the messages the layout renders; stored lists written back
        view, stored = restored_batch(batch, self.layout, self._reject)
        return {**self._tokenize(view), **stored}

    def _tokenize(self, batch: dict[str, list]) -> dict[str, list]:
        if self.approach == RowKind.STEPS:
            return self._steps(batch)
        if self.approach == RowKind.PAIRS:
            return self._pairs(batch)
        if self.approach == RowKind.SCORED:
            return self._pointwise(batch)
        if self.approach == RowKind.LIST:
            return tokenize_ranked(self, batch)
        return tokenize_conversations(self, batch)

    def _steps(self, batch: dict[str, list]) -> dict[str, list]:
        from rmspec.data.steps import StepTokenizeStage

        if not hasattr(self, "_step_stage"):
            self._step_stage = StepTokenizeStage(
                self.layout, self.step_separator or "\n", self.max_tokens, self.policy, self.stage
            )
        return self._step_stage(batch)

    def _reject(self, batch: dict[str, list], i: int, reason: str, detail: str) -> None:
        batch["reject_stage"][i] = self.stage
        batch["reject_reason"][i] = reason
        batch["reject_detail"][i] = detail

    def _decode(self, ids: list[int]) -> str:
        return marks.decode(self.layout.tok, ids) if self.layout.pictures else self.layout.tok.decode(ids)

    def _special_encode(self, texts: list[str]) -> list[list[int]]:
        """Texts as the processor's tokenizer reads them (a model's image part: its special tokens)."""
        return self.layout.tok(texts, add_special_tokens=False)["input_ids"]

    def _marks_differ(self, batch: dict[str, list], i: int, sides: dict[str, Any]) -> bool:
        """Reject a row one of whose sides holds more or fewer picture marks than the row has images (a
        U+FFFC in its text: the character rmspec writes a picture's place as); True if rejected."""
        if not self.layout.pictures:
            return False
        n = len(batch["images"][i] or []) if "images" in batch else 0
        for name, seg in sides.items():
            found = marks.count(seg.ids())
            if found != n:
                self._reject(
                    batch,
                    i,
                    "image_mark_in_text",
                    f"{name}: {found} picture place(s) for {n} image(s): the text holds U+FFFC (OBJECT REPLACEMENT "
                    "CHARACTER), which rmspec reserves for a picture's place; remove it from the text",
                )
                return True
        return False

    def _visual(self, batch: dict[str, list], segs: dict[int, Any]) -> dict[int, int]:
        """Per live row with images: the positions its images add beyond their placeholders' tokens. A row
        an image of which the processor refuses is rejected here (``image_<reason>``) and leaves ``segs``."""
        if self.visual is None or "images" not in batch:
            return {}
        from rmspec.vision.tokens import extra_positions

        rows = [i for i in segs if batch["images"][i]]
        extra, refused = extra_positions(self.visual, [], [], [batch["images"][i] for i in rows], self._special_encode)
        for k, exc in refused.items():
            i = rows[k]
            self._reject(batch, i, f"image_{exc.reason}", exc.detail)
            del segs[i]
        return {i: n for k, (i, n) in enumerate(zip(rows, extra)) if k not in refused}

    def _image_cut(self, batch: dict[str, list], i: int, before: Any, after: Any, extra: int) -> bool:
        """Reject a row whose prompt cut removed (part of) an image placeholder; True if rejected."""
        if not extra or len(after.prompt) == len(before.prompt):
            return False
        kept, had = marks.count(after.prompt), marks.count(before.prompt)
        if kept == had:
            return False
        self._reject(
            batch,
            i,
            "image_cut",
            f"fitting max {self.max_tokens} ({extra} of them the images' visual tokens) cuts {had - kept} of the "
            f"prompt's {had} image(s): raise training.max_length or lower model.vision.max_pixels",
        )
        return True

    def _over(self, detail: str, extra: int) -> str:
        return (
            f"{detail} (max_length {self.max_tokens} less the {extra} visual tokens of the row's images)"
            if extra
            else detail
        )

    def _pairs(self, batch: dict[str, list]) -> dict[str, list]:
        n = len(batch["id"])
        live = [i for i in range(n) if not batch["reject_reason"][i]]
        prompts = [batch["prompt_messages"][i] for i in live]
        chosen_segs, rejected_segs = self.layout.segments_many(
            prompts, [[batch["chosen"][i] for i in live], [batch["rejected"][i] for i in live]]
        )
        seg_c, seg_r = dict(zip(live, chosen_segs)), dict(zip(live, rejected_segs))
        visual = self._visual(batch, seg_c)
        shown = dict(zip(live, self.layout.prompt_texts(prompts)))
        out: dict[str, list[Any]] = {
            k: [None] * n
            for k in (
                "prompt",
                "chosen_input_ids",
                "rejected_input_ids",
                "prompt_tokens",
                "chosen_tokens",
                "rejected_tokens",
                "chosen_length",
                "rejected_length",
                "truncated",
                "shared_prefix_cut",
            )
        }
        if self.types:
            out["chosen_token_type_ids"] = [None] * n
            out["rejected_token_type_ids"] = [None] * n
        for i in range(n):
            out["prompt"][i], out["truncated"][i], out["shared_prefix_cut"][i] = "", False, False
            out["chosen_input_ids"][i] = out["rejected_input_ids"][i] = []
            out["prompt_tokens"][i] = out["chosen_tokens"][i] = out["rejected_tokens"][i] = 0
            out["chosen_length"][i] = out["rejected_length"][i] = 0
            if self.types:
                out["chosen_token_type_ids"][i] = out["rejected_token_type_ids"][i] = []
            if i not in seg_c:
                continue
            c, r = seg_c[i], seg_r[i]
            if self._marks_differ(batch, i, {"chosen": c, "rejected": r}):
                continue
            v = visual.get(i, 0)  # the images' visual tokens beyond their placeholders
            limit = self.max_tokens - v  # what the text may take
            out["prompt"][i] = shown[i]
            out["prompt_tokens"][i], out["chosen_tokens"][i], out["rejected_tokens"][i] = (
                len(c.prompt) + v,
                len(c.body),
                len(r.body),
            )
            out["chosen_length"][i], out["rejected_length"][i] = len(c) + v, len(r) + v
            longest = max(len(c), len(r))
            # Both sides lose the same prompt tokens, so they still answer the same prompt.
            cut = longest - limit if self.policy == CUT_PROMPT and longest > limit else None
            fc, reason, detail = fit(c, limit, self.policy, cut)
            fr, reason_r, detail_r = fit(r, limit, self.policy, cut) if fc is not None else (None, "", "")
            if fc is None or fr is None:
                self._reject(batch, i, reason or reason_r, self._over(detail or detail_r, v))
                continue
            if self._image_cut(batch, i, c, fc, v):
                continue
            truncated = len(fc) < len(c) or len(fr) < len(r)
            if truncated and fc.ids() == fr.ids():
                self._reject(
                    batch,
                    i,
                    "identical_after_truncation",
                    f"chosen and rejected are the same {len(fc)} tokens once cut to max {self.max_tokens}",
                )
                continue
            out["truncated"][i] = truncated
            out["shared_prefix_cut"][i] = shared_prefix_cut(len(c), len(r), limit, cut)
            out["chosen_input_ids"][i], out["rejected_input_ids"][i] = fc.ids(), fr.ids()
            if self.types:
                out["chosen_token_type_ids"][i], out["rejected_token_type_ids"][i] = fc.type_ids(), fr.type_ids()
            if truncated:  # show what the model sees
                if len(fc.prompt) < len(c.prompt):
                    out["prompt"][i] = self._decode(fc.head + fc.prompt)
                if len(fc.body) < len(c.body):
                    batch["chosen"][i] = self._decode(fc.body)
                if len(fr.body) < len(r.body):
                    batch["rejected"][i] = self._decode(fr.body)
        return {**batch, **out}

    def _pointwise(self, batch: dict[str, list]) -> dict[str, list]:
        n = len(batch["id"])
        live = [i for i in range(n) if not batch["reject_reason"][i]]
        prompts = [batch["prompt_messages"][i] for i in live]
        segs = dict(zip(live, self.layout.segments(prompts, [batch["response"][i] for i in live])))
        visual = self._visual(batch, segs)
        shown = dict(zip(live, self.layout.prompt_texts(prompts)))
        out: dict[str, list] = {
            k: [None] * n for k in ("prompt", "input_ids", "prompt_tokens", "response_tokens", "length", "truncated")
        }
        if self.types:
            out["token_type_ids"] = [[] for _ in range(n)]
        for i in range(n):
            out["prompt"][i], out["input_ids"][i], out["truncated"][i] = "", [], False
            out["prompt_tokens"][i] = out["response_tokens"][i] = out["length"][i] = 0
            if i not in segs:
                continue
            s, v = segs[i], visual.get(i, 0)
            if self._marks_differ(batch, i, {"response": s}):
                continue
            out["prompt"][i] = shown[i]
            out["prompt_tokens"][i], out["response_tokens"][i], out["length"][i] = (
                len(s.prompt) + v,
                len(s.body),
                len(s) + v,
            )
            f, reason, detail = fit(s, self.max_tokens - v, self.policy)
            if f is None:
                self._reject(batch, i, reason, self._over(detail, v))
                continue
            if self._image_cut(batch, i, s, f, v):
                continue
            out["truncated"][i] = len(f) < len(s)
            out["input_ids"][i] = f.ids()
            if self.types:
                out["token_type_ids"][i] = f.type_ids()
            if len(f.prompt) < len(s.prompt):
                out["prompt"][i] = self._decode(f.head + f.prompt)
            if len(f.body) < len(s.body):
                batch["response"][i] = self._decode(f.body)
        return {**batch, **out}
