"""`data.mapping`: how a source's columns map onto the canonical record (a preset, explicit columns)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rmspec.spec import presets
from rmspec.spec.base import Section

PRESETS = presets.NAMES  # the preset table's names (rmspec.spec.presets holds each layout)


class ColumnMap(Section):
    prompt: str | None = Field(None, description="Column with the prompt (text or messages).")
    chosen: str | None = Field(None, description="Column with the preferred response.")
    rejected: str | None = Field(None, description="Column with the dispreferred response.")
    margin: str | None = Field(
        None,
        description="Column with a per-pair margin (Bradley-Terry: needs approach.margin: subtract or scale, "
        "or use_margin: true; validate refuses a margin column the loss would ignore).",
    )
    score_chosen: str | None = Field(
        None,
        description="Pairs: column with the chosen response's score (read by augment pairs_from_scores; "
        "a column named score_chosen is read without it).",
    )
    score_rejected: str | None = Field(
        None, description="Pairs: column with the rejected response's score (see score_chosen)."
    )
    response: str | None = Field(None, description="Pointwise: column with the scored response.")
    scores: dict[str, str] | None = Field(None, description="Pointwise: attribute name -> column holding its score.")
    messages: str | None = Field(None, description="Generative: column with the chat messages.")
    responses: str | None = Field(None, description="Listwise: column with the list of N >= 2 responses to one prompt.")
    response_scores: str | None = Field(
        None, description="Listwise: column with one score per response (higher is better; equal scores are tied)."
    )
    tie: str | None = Field(
        None,
        description="Pairs: column with a boolean tie label (default: a `tie` column when the data has one).",
    )
    steps: str | None = Field(
        None, description="Process: column with the list of steps (math-shepherd: the text with ки markers)."
    )
    step_labels: str | None = Field(
        None,
        description="Process: column with the step labels (bools; math-shepherd: text with +/-; processbench: first wrong step or -1).",
    )
    images: str | None = Field(
        None,
        description="Column with the row's images (a list per row, or one image): paths relative to the data "
        "file, data: URIs, or bytes / datasets Image features (default: an `images` column when the data has "
        "one). The prompt marks each with a {type: image} content part or, as text, data.mapping.image_placeholder "
        "(<image>); every image is decoded and checked, and a row with a bad image or a different count goes to "
        "rejects.jsonl (docs/multimodal.md).",
    )
    id: str | None = Field(None, description="Column with a stable row id (kept in rejects and reports).")
    group: str | None = Field(
        None, description="Column for stratified splits and per-source reports (e.g. source, subset)."
    )


class MappingSpec(Section):
    preset: Literal[PRESETS] | None = Field(  # type: ignore[valid-type]
        None, description="A known dataset layout. Omit and give columns for anything else."
    )
    columns: ColumnMap = Field(
        default_factory=ColumnMap, description="Explicit columns; override the preset's defaults."
    )
    binarize: Literal["best_vs_worst", "best_vs_random", "all_pairs", "ranked"] = Field(
        "best_vs_worst",
        description="ultrafeedback preset: how completions become pairs, or ranked: one row with "
        "every rated completion (approach kind listwise). A rejected column holding a list of answers (LongRM's "
        "`rejects`): all_pairs gives one pair per rejected answer, best_vs_random one (seeded by the row); "
        "best_vs_worst and ranked reject such a row (rejected_list), since its rejected answers are not ranked. "
        "With approach kind listwise, chosen and rejected columns give one list: the chosen first, the rejected "
        "tied below it.",
    )
    pair_by: str | None = Field(
        None, description="helpsteer2 preset: build pairs by this attribute instead of pointwise rows."
    )
    image_placeholder: str | None = Field(
        "<image>",
        min_length=1,
        description="Rows with images: the text that marks a picture's place in this source's prompts (LLaVA-style "
        "data). Read only in the prompt of a row that has images and whose prompt has no {type: image} parts; "
        "its count must equal the row's images (else the row is rejected, image_count_mismatch). Anywhere else "
        "(a reply, a row without images) it is text. null: this source has no placeholder; the images go before "
        "the prompt's text (docs/multimodal.md).",
    )
    chat_template: Literal["auto", "tokenizer", "plain"] = Field(
        "auto",
        description="How messages become text: the tokenizer's chat template, a plain 'User:/Assistant:' layout, or auto (template when the tokenizer has one).",
    )

    @staticmethod
    def holds_answers(value: Any) -> bool:
        """Whether a rejected column's value is a list of answers (it holds texts; a list of messages is a
        conversation): rmspec.data.rejected_list reads it as binarize says, the plan counts its pairs."""
        return isinstance(value, list) and any(isinstance(v, str) for v in value)

    def ranks_chosen_over_rejected(self) -> bool:
        """Listwise rows made of chosen and rejected columns (rmspec.data.rejected_list): no preset, both mapped,
        no responses column."""
        c = self.columns
        return self.preset is None and c.chosen is not None and c.rejected is not None and c.responses is None
