"""Presets: how a known dataset layout maps onto the canonical record (see records.py).

`RowMapper(mapping, approach, columns)` checks once, up front, that the columns it needs exist
(a wrong column name is a `DataError` that lists the columns there are, not thousands of
rejects); then `mapper(row, index)` returns the row's canonical records, or raises `Reject`
when the row does not fit (missing field, wrong type, a transcript that cannot be split). One
source row usually gives one record; raw UltraFeedback (rmspec.data.ultrafeedback) with `all_pairs`
gives several, as does a rejected column holding a list of answers (rmspec.data.rejected_list).
"""

from __future__ import annotations

import math
from typing import Any

from rmspec.data import rejected_list
from rmspec.data.image_column import row_images
from rmspec.data.records import Reject
from rmspec.data.row_values import conversation_pair, hh_turns, messages, number, required, split_hh, text
from rmspec.data.steps import steps_record
from rmspec.data.ultrafeedback import ultrafeedback_records
from rmspec.errors import DataError
from rmspec.spec import presets
from rmspec.spec.row_kinds import RowKind
from rmspec.vision.images import ImageReject
from rmspec.vision.rows import RowImages

# How each process preset writes its step labels (rmspec.data.steps reads them): bools by default.
STEP_LABELS = {"math-shepherd": "marked_text", "processbench": "first_error"}


class RowMapper:
    def __init__(
        self,
        mapping: Any,
        approach: Any,
        columns: list[str],
        where: str = "data.mapping",
        data_files: list[str] | None = None,
        image_options: Any = None,
    ):
        self.mapping = mapping
        self.preset = mapping.preset
        self.approach = approach.row_kind  # the row shape (a GRPO judge maps pairs)
        self.binarize = mapping.binarize
        self.pair_by = mapping.pair_by
        self.ties = approach.tie_rows  # a tie row is a reject unless the loss trains ties
        self.margin_map = approach.margin_table
        self.where = where
        explicit = {k: v for k, v in mapping.columns.model_dump().items() if v is not None}
        self.layout = presets.get(self.preset)  # None: explicit columns only
        defaults = dict(self.layout.columns) if self.layout else {}
        self.cols: dict[str, Any] = {**defaults, **explicit}
        # Optional columns the presets read when the data has them.
        optional = [
            "id",
            "score_chosen",
            "score_rejected",
            "tie",
            "images",
            *(self.layout.optional if self.layout else ()),
        ]
        for field in optional:
            if field not in self.cols and field in columns:
                self.cols[field] = field
        self.attributes = approach.score_attributes
        self._check(columns)
        # Images: read and checked before the row is mapped (rmspec.data.image_column).
        self.data_files = data_files or []
        self.images: RowImages | None = None
        if "images" in self.cols:
            images_first = bool(self.layout and self.layout.images_first)
            self.images = row_images(
                where,
                self.cols["images"],
                approach,
                image_options,
                self.data_files,
                images_first,
                mapping.image_placeholder,
            )

    # ------------------------------------------------------------ up-front checks

    def output_approach(self) -> str:
        """The record kind this mapper writes (helpsteer2 with pair_by writes scored responses first)."""
        if self.paired_scores:
            return self.layout.rows if self.layout else self.approach
        return self.approach

    @property
    def paired_scores(self) -> bool:
        """A preset of scored responses that can be paired by an attribute (helpsteer2): its mapper writes
        the scored responses; the data stage pairs them afterwards where pair_by says so."""
        return self.layout is not None and self.layout.pairs_by_attribute

    def _check(self, columns: list[str]) -> None:
        need = self._required()
        layout = self.layout
        if layout and layout.pairs_by_attribute and self.approach == RowKind.PAIRS and not self.pair_by:
            raise DataError(
                f"{self.where}: the {layout.name} preset gives {layout.rows.description}, but approach is "
                f"{RowKind.PAIRS}",
                f"set mapping.pair_by: {layout.attributes[0]} to build pairs per prompt, or use approach kind: "
                f"{layout.rows}",
            )
        if self.pair_by and not (layout and layout.pairs_by_attribute):
            pairable = " or ".join(p.name for p in presets.TABLE if p.pairs_by_attribute)
            raise DataError(
                f"{self.where}.pair_by only applies to the {pairable} preset (preset is {self.preset!r})",
                "remove pair_by",
            )
        given = presets.mismatch(self.mapping, self.approach)  # the same check as validate's
        if given is not None and not (layout and layout.pairs_by_attribute and self.pair_by):
            raise DataError(
                f"{self.where}.preset: {self.preset!r} gives {given} data, but approach.kind is {self.approach}",
                "choose a preset that matches the approach, or map the columns explicitly",
            )
        if self.preset is None and not need:
            raise DataError(
                f"{self.where}: no preset and no columns", "set preset: (e.g. pairs) or map columns: explicitly"
            )
        if "images" in self.cols:
            need = {**need, "images": self.cols["images"]}
        missing = [f"{field} -> {col!r}" for field, col in need.items() if col not in columns]
        if missing:
            raise DataError(
                f"{self.where}: the source has no column(s) {', '.join(missing)}; it has: {', '.join(columns) or '(none)'}",
                "map the right names under data.mapping.columns, or pick the preset that matches this dataset",
            )

    def _required(self) -> dict[str, str]:
        c = self.cols
        layout = self.layout
        if layout is not None and layout.reads:  # raw layouts (ultrafeedback, shp): their own columns, always
            return {**{f: c[f] for f in layout.columns}, **{col: col for col in layout.reads}}
        if layout is not None and layout.pairs_by_attribute:
            attrs = [self.pair_by] if self.pair_by else self.attributes
            score_cols = c.get("scores") or {a: a for a in layout.attributes}
            unknown = [a for a in attrs if a not in score_cols]
            if unknown:
                raise DataError(
                    f"{self.where}: no score column for attribute(s) {', '.join(unknown)}",
                    f"map them under data.mapping.columns.scores (known: {', '.join(score_cols)})",
                )
            return {"prompt": c["prompt"], "response": c["response"], **{a: score_cols[a] for a in attrs}}
        if self.approach == RowKind.MESSAGES:
            return {"messages": c.get("messages", "messages")}
        if self.approach == RowKind.LIST:
            if self.chosen_over_rejected:
                need = {"chosen": c["chosen"], "rejected": c["rejected"]}
            else:
                need = {
                    "responses": c.get("responses", "responses"),
                    "response_scores": c.get("response_scores", "scores"),
                }
            return {**need, **({"prompt": c["prompt"]} if "prompt" in c else {})}
        if self.approach == RowKind.STEPS:
            need = {"steps": c.get("steps", "completions"), "step_labels": c.get("step_labels", "labels")}
            if "prompt" in c:
                need["prompt"] = c["prompt"]
            return need
        if self.approach == RowKind.SCORED:
            scores = c.get("scores") or {}
            unknown = [a for a in self.attributes if a not in scores]
            if unknown:
                raise DataError(
                    f"{self.where}.columns.scores: no column for attribute(s) {', '.join(unknown)}",
                    "map each approach.attributes entry to a column under data.mapping.columns.scores",
                )
            return {
                "response": c.get("response", "response"),
                **{a: scores[a] for a in self.attributes},
                **({"prompt": c["prompt"]} if "prompt" in c else {}),
            }
        need = {"chosen": c.get("chosen", "chosen"), "rejected": c.get("rejected", "rejected")}
        if "prompt" in c:
            need["prompt"] = c["prompt"]
        if "margin" in c:
            need["margin"] = c["margin"]
        return need

    # ------------------------------------------------------------ per row

    def __call__(self, row: dict[str, Any], index: int) -> list[dict[str, Any]]:
        base: dict[str, Any] = {"id": self._id(row, index), "group": self._group(row)}
        if self.images is not None:
            try:
                row, refs, _ = self.images.read(row, self.cols)
            except ImageReject as exc:
                raise Reject(f"image_{exc.reason}", f"{self.location(index)}: {exc.detail}") from None
            base["images"] = refs
        if self.preset == "hh-rlhf":
            records = [self._hh(row)]
        elif self.preset == "shp":
            records = [self._shp(row)]
        elif self.preset == "ultrafeedback":
            records = ultrafeedback_records(row, self.cols["prompt"], self.binarize, index)
        elif self.paired_scores:
            records = [self._pointwise(row, self.pair_by and [self.pair_by])]
        elif self.approach == RowKind.STEPS:
            records = [steps_record(STEP_LABELS.get(self.preset or "", "bools"), row, self.cols, messages)]
        elif self.approach == RowKind.MESSAGES:
            records = [
                {
                    "messages": messages(
                        required(row, self.cols.get("messages", "messages")), "messages", need_last_assistant=True
                    )
                }
            ]
        elif self.approach == RowKind.SCORED:
            records = [self._pointwise(row, None)]
        elif self.approach == RowKind.LIST:
            records = [self._ranked(row)]
        else:
            records = self._pairs(row, index)
        if self.approach == RowKind.PAIRS:
            records = [self._tie_and_margin(row, rec) for rec in records]
        out = []
        for k, rec in enumerate(records):
            rec = {**base, **rec}
            if len(records) > 1:
                rec["id"] = f"{base['id']}-{k}"
            out.append(rec)
        return out

    def location(self, index: int) -> str:
        """`file:line` of a row of one JSON Lines file (its line is its index + 1); else `row N`."""
        if len(self.data_files) == 1 and self.data_files[0].endswith(".jsonl"):
            return f"{self.data_files[0]}:{index + 1}"
        return f"row {index}"

    def _id(self, row: dict[str, Any], index: int) -> str:
        col = self.cols.get("id")
        value = row.get(col) if col else None
        return str(value) if value not in (None, "") else f"row-{index}"

    def _group(self, row: dict[str, Any]) -> str:
        col = self.cols.get("group")
        if not col:
            return ""
        value = row.get(col)
        return "" if value is None else str(value)

    def _scores_pair(self, row: dict[str, Any]) -> tuple[float | None, float | None]:
        sc = self.cols.get("score_chosen")
        sr = self.cols.get("score_rejected")
        a = number(row.get(sc), sc) if sc and row.get(sc) is not None else None
        b = number(row.get(sr), sr) if sr and row.get(sr) is not None else None
        return a, b

    def _pairs(self, row: dict[str, Any], index: int) -> list[dict[str, Any]]:
        """One pair; or, where the rejected column holds a list of answers, the pairs binarize picks
        (rmspec.data.rejected_list)."""
        chosen_v = required(row, self.cols.get("chosen", "chosen"))
        rejected_v = required(row, self.cols.get("rejected", "rejected"))
        prompt_col = self.cols.get("prompt")
        listed = rejected_list.answers(rejected_v) if isinstance(chosen_v, str) else None
        if listed is not None:
            chosen = text(chosen_v, "chosen")
            rejected_all = rejected_list.rejected_picks(listed, self.binarize, index)
            prompt_msgs = messages(required(row, prompt_col), "prompt") if prompt_col else []
        elif isinstance(chosen_v, list) or isinstance(rejected_v, list):
            prompt_msgs, chosen, rejected = conversation_pair(
                chosen_v,
                rejected_v,
                required(row, prompt_col) if prompt_col and row.get(prompt_col) is not None else None,
            )
            rejected_all = [rejected]
        else:
            chosen = text(chosen_v, "chosen")
            rejected_all = [text(rejected_v, "rejected")]
            prompt_msgs = messages(required(row, prompt_col), "prompt") if prompt_col else []
        margin = 0.0
        if "margin" in self.cols:
            margin = number(required(row, self.cols["margin"]), "margin")
        sc, sr = self._scores_pair(row)
        return [
            {
                "prompt_messages": prompt_msgs,
                "chosen": chosen,
                "rejected": rejected,
                "margin": margin,
                "score_chosen": sc,
                "score_rejected": sr,
            }
            for rejected in rejected_all
        ]

    def _tie_and_margin(self, row: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
        """A tie is never trained as a win: a reject (reason `tie`) unless ties: davidson trains it.
        margin_map replaces the labelled strength (INF-ORM's 1/2/3 -> 1/3/10)."""
        col = self.cols.get("tie")
        tie = row.get(col) if col else None
        if tie is not None and not isinstance(tie, bool):
            raise Reject("wrong_type", f"{col} must be true or false, got {tie!r}")
        if tie and self.ties not in ("davidson", "verdict"):  # trained: Davidson ties, or a judge's tie verdict
            raise Reject("tie", "annotated as a tie; approach.ties: reject (ties: davidson trains them)")
        rec["tie"] = bool(tie)
        if self.margin_map is not None:
            value = rec.get("margin") or 0.0
            if float(value) not in self.margin_map:
                raise Reject(
                    "margin_not_in_map",
                    f"margin {value:g} is not a key of approach.margin_map "
                    f"({', '.join(f'{k:g}' for k in sorted(self.margin_map))})",
                )
            rec["margin"] = float(self.margin_map[float(value)])
        return rec

    @property
    def chosen_over_rejected(self) -> bool:
        """Listwise rows mapped from chosen and rejected columns (rmspec.data.rejected_list.ranked_record)."""
        return self.mapping.ranks_chosen_over_rejected()

    def _ranked(self, row: dict[str, Any]) -> dict[str, Any]:
        """One prompt with N >= 2 responses and one score each (higher is better)."""
        prompt_col = self.cols.get("prompt")
        if self.chosen_over_rejected:
            rejected_v = required(row, self.cols["rejected"])
            rejected = rejected_list.answers(rejected_v) or [text(rejected_v, "rejected")]
            prompt = messages(required(row, prompt_col), "prompt") if prompt_col else []
            return rejected_list.ranked_record(prompt, text(required(row, self.cols["chosen"]), "chosen"), rejected)
        responses = required(row, self.cols.get("responses", "responses"))
        scores = required(row, self.cols.get("response_scores", "scores"))
        if not isinstance(responses, list) or not isinstance(scores, list):
            raise Reject("wrong_type", "responses and scores must be lists")
        if len(responses) != len(scores):
            raise Reject("malformed", f"{len(responses)} responses but {len(scores)} scores")
        if len(responses) < 2:
            raise Reject("too_few_completions", f"{len(responses)} response(s); a ranking needs 2")
        texts = [text(r, f"responses[{k}]") for k, r in enumerate(responses)]
        values = [number(s, f"scores[{k}]") for k, s in enumerate(scores)]
        if len(set(values)) < 2:
            raise Reject("tie", f"all responses score {values[0]:g}")
        return {
            "prompt_messages": messages(required(row, prompt_col), "prompt") if prompt_col else [],
            "responses": texts,
            "scores": values,
        }

    def _hh(self, row: dict[str, Any]) -> dict[str, Any]:
        chosen_t = text(required(row, self.cols["chosen"]), "chosen")
        rejected_t = text(required(row, self.cols["rejected"]), "rejected")
        prefix_c, chosen = split_hh(chosen_t, "chosen")
        prefix_r, rejected = split_hh(rejected_t, "rejected")
        if prefix_c.strip() != prefix_r.strip():
            raise Reject("malformed", "chosen and rejected transcripts differ before the last Assistant turn")
        return {
            "prompt_messages": hh_turns(prefix_c),
            "chosen": chosen,
            "rejected": rejected,
            "margin": 0.0,
            "score_chosen": None,
            "score_rejected": None,
        }

    def _shp(self, row: dict[str, Any]) -> dict[str, Any]:
        prompt = messages(required(row, self.cols["prompt"]), "history")
        a = text(required(row, self.cols["chosen"]), "human_ref_A")
        b = text(required(row, self.cols["rejected"]), "human_ref_B")
        label = required(row, "labels")
        if isinstance(label, bool) or label not in (0, 1):
            raise Reject("wrong_type", f"labels must be 0 or 1, got {label!r}")
        score_a = number(row["score_A"], "score_A") if row.get("score_A") is not None else None
        score_b = number(row["score_B"], "score_B") if row.get("score_B") is not None else None
        chosen, rejected, sc, sr = (a, b, score_a, score_b) if label == 1 else (b, a, score_b, score_a)
        # Margin from the vote ratio (the SHP paper filters on score_ratio): log(preferred/other).
        margin = math.log(sc / sr) if sc and sr and sc > 0 and sr > 0 else 0.0
        return {
            "prompt_messages": prompt,
            "chosen": chosen,
            "rejected": rejected,
            "margin": margin,
            "score_chosen": sc,
            "score_rejected": sr,
        }

    def _pointwise(self, row: dict[str, Any], attrs: list[str] | None) -> dict[str, Any]:
        attrs = attrs or self.attributes
        score_cols = self.cols.get("scores") or {a: a for a in (self.layout.attributes if self.layout else ())}
        prompt_col = self.cols.get("prompt")
        return {
            "prompt_messages": messages(required(row, prompt_col), "prompt") if prompt_col else [],
            "response": text(required(row, self.cols.get("response", "response")), "response"),
            "scores": [number(required(row, score_cols[a]), a) for a in attrs],
        }
