"""Each approach's own cross-field rules, called from its section's `problems` (rmspec.spec.approach).

Each yields (path, message, hint) like rmspec.spec.rules; none changes a value. The rules that do
not depend on the approach (a filter or preset for other rows, a margin no loss reads) are in
rmspec.spec.rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rmspec.spec import presets
from rmspec.spec.base import Problem
from rmspec.spec.row_kinds import RowKind

if TYPE_CHECKING:
    from rmspec.spec.root import Spec


ENCODER_HINTS = ("bert", "minilm", "deberta", "roberta", "electra", "mpnet", "e5-", "bge-")


def looks_encoder(spec: Spec) -> bool:
    if spec.model.shape is not None:
        return spec.model.shape.architecture == "encoder"
    name = spec.model.name_or_path.lower()
    return any(h in name for h in ENCODER_HINTS)


def mappings(spec: Spec) -> Iterator[tuple[tuple, Any]]:
    """(path, mapping) of each dataset: data.mapping, or each data.sources[i].mapping of a mixture."""
    if spec.data.sources is None:
        yield ("data", "mapping"), spec.data.mapping
    else:
        for i, entry in enumerate(spec.data.sources):
            yield ("data", "sources", i, "mapping"), entry.mapping


# ---------------------------------------------------------------- pointwise


def scores_needed(spec: Spec, approach: Any) -> Iterator[Problem]:
    for path, mapping in mappings(spec):
        yield from _scores(approach, path, mapping)


def _scores(approach: Any, path: tuple, mapping: Any) -> Iterator[Problem]:
    scores = mapping.columns.scores
    preset = presets.get(mapping.preset)
    if preset is not None and preset.rows == RowKind.SCORED and mapping.pair_by is None:
        available = set(scores or {}) | set(preset.attributes)
    elif scores:
        available = set(scores)
    else:
        yield (
            path,
            f"the pointwise approach needs scores, but the mapping gives none (preset: {mapping.preset})",
            f"use preset: {' or '.join(presets.giving(RowKind.SCORED))}, or map columns.response and "
            "columns.scores: {attribute: column}",
        )
        return
    for i, attr in enumerate(approach.attributes):
        if attr not in available:
            yield (
                ("approach", "attributes", i),
                f"attribute {attr!r} is not among the mapped scores ({', '.join(sorted(available))})",
                "add it to data.mapping.columns.scores or remove it here",
            )
    for name in approach.weights or {}:
        if name not in approach.attributes:
            yield (("approach", "weights", name), f"weight for {name!r}, which is not in approach.attributes", None)


# ---------------------------------------------------------------- listwise


def _list_presets() -> str:
    """The presets that give lists, as a hint: `ranked (its columns)` or `X with binarize: ranked`."""
    given = [f"preset: {p.name} ({', '.join(p.columns.values())})" for p in presets.TABLE if p.rows == RowKind.LIST]
    ranked = [f"preset: {p.name} with binarize: ranked" for p in presets.TABLE if p.ranked_from]
    return " or ".join(given + ranked)


def list_needs_lists(spec: Spec) -> Iterator[Problem]:
    preset = presets.get(spec.data.mapping.preset)
    if preset is not None and preset.rows != RowKind.LIST and preset.ranked_from is None:
        yield (
            ("data", "mapping", "preset"),
            f"approach kind listwise needs a prompt with several scored responses; preset {spec.data.mapping.preset!r} "
            "gives another shape",
            f"use {_list_presets()}",
        )
    if preset is not None and preset.ranked_from is not None and spec.data.mapping.binarize != "ranked":
        yield (
            ("data", "mapping", "binarize"),
            "approach kind listwise keeps every rated completion",
            "set data.mapping.binarize: ranked",
        )


# ---------------------------------------------------------------- bradley_terry


def pairs_need_pairs(spec: Spec) -> Iterator[Problem]:
    preset = presets.get(spec.data.mapping.preset)
    rankers = [p.name for p in presets.TABLE if p.ranked_from]
    if preset is not None and preset.ranked_from is not None and spec.data.mapping.binarize == "ranked":
        yield (
            ("data", "mapping", "binarize"),
            "binarize: ranked keeps every rated completion in one row, for listwise",
            "set approach: {kind: listwise}, or binarize: best_vs_worst (or all_pairs) for pairs",
        )
    if preset is not None and preset.rows == RowKind.LIST:
        yield (
            ("data", "mapping", "preset"),
            f"the {preset.name} preset gives {preset.rows.description}, for listwise",
            f"set approach: {{kind: listwise}}, or use preset: {' or '.join(rankers)} with a binarize rule for pairs",
        )
    for path, mapping in mappings(spec):
        yield from _pairs(path, mapping)


def _pairs(path: tuple, mapping: Any) -> Iterator[Problem]:
    preset = presets.get(mapping.preset)
    if preset is None:
        return
    if preset.pairs_by_attribute and mapping.pair_by is None:
        yield (
            (*path, "pair_by"),
            f"the {preset.name} preset gives {preset.rows} rows; bradley_terry needs pairs",
            f"set pair_by: {preset.attributes[0]} (pairs by an attribute) or use approach kind: {preset.rows}",
        )
    if preset.rows == RowKind.MESSAGES:
        yield ((*path, "preset"), f"the {preset.name} preset is for the {preset.rows} approach", None)


def sft_needs_decoder(spec: Spec, sft_weight: float) -> Iterator[Problem]:
    """The SFT regularizer is a next-token loss: an encoder has no causal LM head to keep."""
    if sft_weight > 0 and looks_encoder(spec):
        yield (
            ("approach", "sft_weight"),
            f"sft_weight adds a next-token (language-model) loss, but {spec.model.name_or_path!r} is an encoder",
            "remove approach.sft_weight, or pick a decoder model (e.g. Qwen/Qwen2.5-0.5B-Instruct)",
        )


def margin_needs_a_column(spec: Spec, approach: Any) -> Iterator[Problem]:
    # shp, ultrafeedback and helpsteer2's pair_by derive the margin from their scores; other data
    # needs a margin column.
    if approach.margin_mode == "none":
        return
    for _, mapping in mappings(spec):
        preset = presets.get(mapping.preset)
        if not mapping.columns.margin and not (preset and (preset.margin_from_scores or preset.pairs_by_attribute)):
            field = "margin" if approach.margin else "use_margin"
            yield (
                ("approach", field),
                f"the loss uses a margin ({approach.margin_mode}), but no margin column is mapped",
                f"map data.mapping.columns.margin, or remove approach.{field}",
            )


# ---------------------------------------------------------------- generative


def judge_needs_causal_lm(spec: Spec) -> Iterator[Problem]:
    if looks_encoder(spec):
        yield (
            ("model", "name_or_path"),
            f"the generative approach trains a causal LM, but {spec.model.name_or_path!r} is an encoder",
            "pick a decoder model (e.g. Qwen/Qwen2.5-0.5B-Instruct) or approach kind: bradley_terry",
        )


def judge_writes_verdicts(approach: Any) -> Iterator[Problem]:
    """method: sft learns written verdicts: the GRPO-only options have no effect there."""
    if approach.output != "verdict":
        yield (
            ("approach", "output"),
            "approach.output: scores is trained by reinforcement only: method sft learns written verdicts "
            "(A or B, read with verdict_pattern)",
            "write approach.method: grpo, or delete approach.output (verdict)",
        )
    for name in ("judge_template", "ties", "tie_verdict", "reward", "grpo"):
        if name in approach.model_fields_set:
            yield (
                ("approach", name),
                f"approach.{name} is read by method: grpo only, but approach.method is sft",
                f"write approach.method: grpo, or delete approach.{name}",
            )


# ---------------------------------------------------------------- process


def process_needs_steps(spec: Spec, approach: Any) -> Iterator[Problem]:
    """A PRM learns from step lists with one label per step."""
    steps = presets.giving(RowKind.STEPS)
    default = presets.PRESETS[presets.init_default(RowKind.STEPS) or steps[0]]
    for path, mapping in mappings(spec):
        if mapping.preset is not None and mapping.preset not in steps:
            yield (
                (*path, "preset"),
                f"approach kind process needs steps with step labels, but preset {mapping.preset!r} gives {approach.kind} data of another shape",
                f"use one of: {', '.join(steps)}, or map columns.prompt, columns.steps and columns.step_labels",
            )
        elif mapping.preset is None and not (mapping.columns.steps and mapping.columns.step_labels):
            yield (
                (*path, "columns"),
                "approach kind process needs a steps column and a step_labels column (no preset is set)",
                f"map columns.steps and columns.step_labels, or set preset: {default.name} "
                f"({', '.join(default.columns.values())})",
            )
    split = spec.data.split
    if approach.tune_threshold and split.validation_fraction is None and split.validation_source is None:
        yield (
            ("approach", "tune_threshold"),
            "tune_threshold needs a validation split",
            "set data.split.validation_fraction",
        )
