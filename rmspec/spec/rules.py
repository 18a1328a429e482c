"""Cross-field rules: checks that span sections. Each yields (path, message, hint); none changes a value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rmspec.spec.root import Spec
from rmspec.spec.training_rules import best_checkpoint_rules, optimizer_needs_cuda

Problem = tuple[tuple, str, str | None]

ENCODER_HINTS = ("bert", "minilm", "deberta", "roberta", "electra", "mpnet", "e5-", "bge-")
# Presets whose mapping yields scores for pointwise training (pairs_by turns helpsteer2 into pairs).
SCORE_PRESETS = ("helpsteer2",)
PROCESS_PRESETS = ("stepwise", "math-shepherd", "processbench")
LIST_PRESETS = ("ranked",)
PAIR_PRESETS = ("pairs", "hh-rlhf", "conversational", "ultrafeedback-binarized", "shp", "ultrafeedback")


def _looks_encoder(spec: Spec) -> bool:
    if spec.model.shape is not None:
        return spec.model.shape.architecture == "encoder"
    name = spec.model.name_or_path.lower()
    return any(h in name for h in ENCODER_HINTS)


def _mappings(spec: Spec) -> Iterator[tuple[tuple, object]]:
    """(path, mapping) of each dataset: data.mapping, or each data.sources[i].mapping of a mixture."""
    if spec.data.sources is None:
        yield ("data", "mapping"), spec.data.mapping
    else:
        for i, entry in enumerate(spec.data.sources):
            yield ("data", "sources", i, "mapping"), entry.mapping


def pointwise_needs_scores(spec: Spec) -> Iterator[Problem]:
    for path, mapping in _mappings(spec):
        yield from _pointwise_scores(spec, path, mapping)


def _pointwise_scores(spec: Spec, path: tuple, mapping: Any) -> Iterator[Problem]:
    if spec.approach.kind != "pointwise":
        return
    scores = mapping.columns.scores
    if mapping.preset in SCORE_PRESETS and mapping.pair_by is None:
        available = set(scores or {}) | {"helpfulness", "correctness", "coherence", "complexity", "verbosity"}
    elif scores:
        available = set(scores)
    else:
        yield (
            path,
            f"the pointwise approach needs scores, but the mapping gives none (preset: {mapping.preset})",
            "use preset: helpsteer2, or map columns.response and columns.scores: {attribute: column}",
        )
        return
    for i, attr in enumerate(spec.approach.attributes):
        if attr not in available:
            yield (
                ("approach", "attributes", i),
                f"attribute {attr!r} is not among the mapped scores ({', '.join(sorted(available))})",
                "add it to data.mapping.columns.scores or remove it here",
            )
    for name in spec.approach.weights or {}:
        if name not in spec.approach.attributes:
            yield (("approach", "weights", name), f"weight for {name!r}, which is not in approach.attributes", None)


def pairwise_needs_pairs(spec: Spec) -> Iterator[Problem]:
    if spec.approach.kind == "listwise" and spec.data.mapping.preset not in (*LIST_PRESETS, "ultrafeedback", None):
        yield (
            ("data", "mapping", "preset"),
            f"approach kind listwise needs a prompt with several scored responses; preset {spec.data.mapping.preset!r} "
            "gives another shape",
            "use preset: ranked (prompt, responses, scores) or preset: ultrafeedback with binarize: ranked",
        )
    if (
        spec.approach.kind == "listwise"
        and spec.data.mapping.preset == "ultrafeedback"
        and spec.data.mapping.binarize != "ranked"
    ):
        yield (
            ("data", "mapping", "binarize"),
            "approach kind listwise keeps every rated completion",
            "set data.mapping.binarize: ranked",
        )
    if (
        spec.approach.kind == "bradley_terry"
        and spec.data.mapping.preset == "ultrafeedback"
        and spec.data.mapping.binarize == "ranked"
    ):
        yield (
            ("data", "mapping", "binarize"),
            "binarize: ranked keeps every rated completion in one row, for listwise",
            "set approach: {kind: listwise}, or binarize: best_vs_worst (or all_pairs) for pairs",
        )
    if spec.approach.kind == "bradley_terry" and spec.data.mapping.preset == "ranked":
        yield (
            ("data", "mapping", "preset"),
            "the ranked preset gives N scored responses per prompt, for listwise",
            "set approach: {kind: listwise}, or use preset: ultrafeedback with a binarize rule for pairs",
        )
    if spec.approach.kind != "bradley_terry":
        return
    for path, mapping in _mappings(spec):
        yield from _pairs(path, mapping)


def _pairs(path: tuple, mapping: Any) -> Iterator[Problem]:
    if mapping.preset in ("helpsteer2",) and mapping.pair_by is None:
        yield (
            (*path, "pair_by"),
            "the helpsteer2 preset gives pointwise rows; bradley_terry needs pairs",
            "set pair_by: helpfulness (pairs by an attribute) or use approach kind: pointwise",
        )
    if mapping.preset == "messages":
        yield ((*path, "preset"), "the messages preset is for the generative approach", None)


def generative_needs_causal_lm(spec: Spec) -> Iterator[Problem]:
    if spec.approach.kind == "generative" and _looks_encoder(spec):
        yield (
            ("model", "name_or_path"),
            f"the generative approach trains a causal LM, but {spec.model.name_or_path!r} is an encoder",
            "pick a decoder model (e.g. Qwen/Qwen2.5-0.5B-Instruct) or approach kind: bradley_terry",
        )


def sft_needs_decoder(spec: Spec) -> Iterator[Problem]:
    """The SFT regularizer is a next-token loss: an encoder has no causal LM head to keep."""
    if spec.approach.kind == "bradley_terry" and spec.approach.sft_weight > 0 and _looks_encoder(spec):
        yield (
            ("approach", "sft_weight"),
            f"sft_weight adds a next-token (language-model) loss, but {spec.model.name_or_path!r} is an encoder",
            "remove approach.sft_weight, or pick a decoder model (e.g. Qwen/Qwen2.5-0.5B-Instruct)",
        )


def process_needs_steps(spec: Spec) -> Iterator[Problem]:
    """A PRM learns from step lists with one label per step; other approaches cannot read them."""
    for path, mapping in _mappings(spec):
        yield from _steps(spec, path, mapping)
    split = spec.data.split
    if (
        spec.approach.kind == "process"
        and spec.approach.tune_threshold
        and split.validation_fraction is None
        and split.validation_source is None
    ):
        yield (
            ("approach", "tune_threshold"),
            "tune_threshold needs a validation split",
            "set data.split.validation_fraction",
        )


def _steps(spec: Spec, path: tuple, mapping: Any) -> Iterator[Problem]:
    if spec.approach.kind != "process":
        if mapping.preset in PROCESS_PRESETS:
            yield (
                (*path, "preset"),
                f"the {mapping.preset} preset gives reasoning steps with step labels, for approach kind: process",
                "set approach: {kind: process}, or choose a preset for this approach",
            )
        return
    if mapping.preset not in (*PROCESS_PRESETS, None):
        yield (
            (*path, "preset"),
            f"approach kind process needs steps with step labels, but preset {mapping.preset!r} gives {spec.approach.kind} data of another shape",
            f"use one of: {', '.join(PROCESS_PRESETS)}, or map columns.prompt, columns.steps and columns.step_labels",
        )
    elif mapping.preset is None and not (mapping.columns.steps and mapping.columns.step_labels):
        yield (
            (*path, "columns"),
            "approach kind process needs a steps column and a step_labels column (no preset is set)",
            "map columns.steps and columns.step_labels, or set preset: stepwise (prompt, completions, labels)",
        )


def margin_must_be_used(spec: Spec) -> Iterator[Problem]:
    for path, mapping in _mappings(spec):
        yield from _margin(spec, path, mapping)


def _margin(spec: Spec, path: tuple, mapping: Any) -> Iterator[Problem]:
    margin_col = mapping.columns.margin
    uses = spec.approach.kind == "bradley_terry" and spec.approach.margin_mode != "none"
    if margin_col and not uses:
        yield (
            (*path, "columns", "margin"),
            f"a margin column ({margin_col!r}) is mapped, but the loss ignores it",
            "set approach.margin: subtract (or scale), or remove the margin mapping",
        )
    # shp, ultrafeedback and helpsteer2's pair_by derive the margin from their scores; other data
    # needs a margin column. (`uses` implies bradley_terry: the kind is restated for the type checker.)
    derives_margin = mapping.preset in ("shp", "ultrafeedback", "helpsteer2")
    if uses and spec.approach.kind == "bradley_terry" and not margin_col and not derives_margin:
        field = "margin" if spec.approach.margin else "use_margin"
        yield (
            ("approach", field),
            f"the loss uses a margin ({spec.approach.margin_mode}), but no margin column is mapped",
            f"map data.mapping.columns.margin, or remove approach.{field}",
        )


def batch_divides(spec: Spec) -> Iterator[Problem]:
    hw, tr = spec.hardware, spec.training
    procs = hw.gpus_per_node * hw.nodes
    if tr.global_batch_size % procs:
        yield (
            ("training", "global_batch_size"),
            f"{tr.global_batch_size} pairs cannot be split evenly over {procs} processes "
            f"({hw.nodes} node(s) x {hw.gpus_per_node})",
            f"use a multiple of {procs}, e.g. {procs * max(1, round(tr.global_batch_size / procs))}",
        )
    elif tr.micro_batch_size != "auto" and tr.global_batch_size % (tr.micro_batch_size * procs):
        yield (
            ("training", "micro_batch_size"),
            f"global batch {tr.global_batch_size} is not a multiple of micro batch {tr.micro_batch_size} x {procs} processes",
            "pick a micro batch that divides global_batch_size / processes, or micro_batch_size: auto",
        )


def early_stopping_needs_eval(spec: Spec) -> Iterator[Problem]:
    if spec.training.early_stopping is None:
        return
    split = spec.data.split
    if split.validation_fraction is None and split.validation_source is None:
        yield (
            ("training", "early_stopping"),
            "early stopping needs a validation split",
            "set data.split.validation_fraction",
        )
    if spec.training.eval_steps is None:
        yield (("training", "early_stopping"), "early stopping needs periodic evaluation", "set training.eval_steps")


def split_has_one_way(spec: Spec) -> Iterator[Problem]:
    split = spec.data.split
    if split.validation_fraction is not None and split.validation_source is not None:
        yield (
            ("data", "split"),
            "both validation_fraction and validation_source are set",
            "keep one: delete validation_fraction to validate on validation_source (a validation_source alone "
            "turns the fraction off), or delete validation_source to hold out a fraction",
        )


def hub_push_needs_repo(spec: Spec) -> Iterator[Problem]:
    if spec.output.push_to_hub and not spec.output.hub_repo_id:
        yield (
            ("output", "hub_repo_id"),
            "push_to_hub is on but no hub_repo_id is given",
            "set output.hub_repo_id: org/name",
        )


def lora_precision(spec: Spec) -> Iterator[Problem]:
    if spec.model.lora is not None and spec.model.dtype == "float16" and spec.hardware.device == "cpu":
        yield (("model", "dtype"), "float16 training is not supported on CPU", "use dtype: auto or float32")


RULES = (
    pointwise_needs_scores,
    pairwise_needs_pairs,
    generative_needs_causal_lm,
    sft_needs_decoder,
    process_needs_steps,
    margin_must_be_used,
    batch_divides,
    early_stopping_needs_eval,
    split_has_one_way,
    hub_push_needs_repo,
    lora_precision,
    best_checkpoint_rules,
    optimizer_needs_cuda,
)


def check(spec: Spec) -> list[Problem]:
    from rmspec.spec.option_rules import OPTION_RULES

    return [problem for rule in (*RULES, *OPTION_RULES) for problem in rule(spec)]
