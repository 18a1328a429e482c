"""The mapping presets: one row per known dataset layout, read by everyone who needs to know one.

`data.mapping.preset` takes these names (rmspec.spec.data_mapping); validate checks a preset against
the approach's rows (rmspec.spec.rules) and each approach's own rules read the columns here; the data
stage maps a row with the preset's reader (rmspec.data.presets, the only other module that knows a
preset by name: how hh-rlhf transcripts split or UltraFeedback completions binarize is code, not
data); `rmspec init` writes a preset with its example source (rmspec.scaffold.data_choice); the
`pairs` benchmark maps a preference file through the same readers (rmspec.evaluate.kinds.pairs).

A new layout is one row here plus its reader in rmspec.data.presets. Light: no torch, no datasets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rmspec.spec.row_kinds import RowKind

DEMO = "demo-file"  # a source kind of this table only: a file under rmspec/data/demo (init resolves it)


def demo(name: str) -> dict[str, Any]:
    return {"kind": DEMO, "file": name}


def hub(path: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "huggingface", "path": path, **extra, "split": "train"}


@dataclass(frozen=True)
class Preset:
    """A known dataset layout: the rows it gives and where each canonical field is read from."""

    name: str
    rows: RowKind  # the rows it gives (the approaches it serves are those that train on these rows)
    about: str
    columns: Mapping[str, str] = field(default_factory=dict)  # canonical field -> default source column
    reads: tuple[str, ...] = ()  # source columns read under their own name (not mappable), always required
    optional: tuple[str, ...] = ()  # canonical fields read from the same-named column when the data has it
    # pair_by: ATTR turns its scored responses into pairs by that attribute (helpsteer2).
    pairs_by_attribute: bool = False
    attributes: tuple[str, ...] = ()  # the score attributes it has (one column each, same name)
    # binarize: ranked keeps every rated completion of this column as one list row (ultrafeedback).
    ranked_from: str | None = None
    margin_from_scores: bool = False  # a pair's margin comes from its own scores: no margin column needed
    # Rows already in the record's text columns, only renamed: the planner samples their lengths.
    plain_text: bool = False
    extra: str | None = None  # the optional-dependency extra its reader needs (None: the base install)
    # `rmspec init`: the dataset named for this layout, a source in its layout, and whether it is the
    # layout `init --data FILE` writes for an approach that trains on its rows.
    dataset: dict[str, Any] | None = None
    dataset_mapping: Mapping[str, Any] = field(default_factory=dict)  # extra mapping keys init writes with it
    example: dict[str, Any] | None = None
    demo_name: str | None = None  # a shipped demo in this layout, by the name `init --data` takes
    demo_file: str | None = None
    init_default: bool = False
    # Its prompts name no image (RLAIF-V's `question`): each row's images go before the prompt text.
    images_first: bool = False


HELPSTEER2_ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
PAIR_COLUMNS = MappingProxyType({"chosen": "chosen", "rejected": "rejected"})

TABLE: tuple[Preset, ...] = (
    Preset(
        "pairs",
        RowKind.PAIRS,
        "prompt, chosen, rejected (optional margin)",
        {"prompt": "prompt", **PAIR_COLUMNS},
        plain_text=True,
        example=demo("preferences.jsonl"),
        demo_name="demo",
        demo_file="preferences.jsonl",
        init_default=True,
    ),
    Preset(
        "hh-rlhf",
        RowKind.PAIRS,
        "whole transcripts; prompt = shared prefix up to the last Assistant turn",
        PAIR_COLUMNS,
        dataset=hub("Anthropic/hh-rlhf", data_dir="helpful-base"),
    ),
    Preset(
        "conversational",
        RowKind.PAIRS,
        "chosen/rejected as message lists (ultrafeedback_binarized, Skywork)",
        PAIR_COLUMNS,
        optional=("prompt",),  # TRL's explicit-prompt layout; ignored for full conversations
        example=hub("trl-lib/ultrafeedback_binarized"),
    ),
    Preset(
        "ultrafeedback-binarized",
        RowKind.PAIRS,
        "trl-lib/ultrafeedback_binarized: chosen/rejected conversations",
        PAIR_COLUMNS,
        optional=("prompt",),
        dataset=hub("trl-lib/ultrafeedback_binarized"),
    ),
    Preset(
        "shp",
        RowKind.PAIRS,
        "history, human_ref_A/B, labels",
        {"prompt": "history", "chosen": "human_ref_A", "rejected": "human_ref_B"},
        reads=("labels",),
        margin_from_scores=True,
        dataset=hub("stanfordnlp/SHP"),
    ),
    Preset(
        "helpsteer2",
        RowKind.SCORED,
        "prompt, response, five 0-4 attributes",
        {"prompt": "prompt", "response": "response"},
        pairs_by_attribute=True,
        attributes=HELPSTEER2_ATTRIBUTES,
        dataset=hub("nvidia/HelpSteer2"),
        demo_name="scored-demo",
        demo_file="scored.jsonl",
    ),
    Preset(
        "ultrafeedback",
        RowKind.PAIRS,
        "raw: instruction + completions to binarize",
        {"prompt": "instruction"},
        reads=("completions",),
        ranked_from="completions",
        margin_from_scores=True,
        dataset=hub("openbmb/UltraFeedback"),
        dataset_mapping={"binarize": "best_vs_worst"},
    ),
    Preset(
        "ranked",
        RowKind.LIST,
        "listwise: prompt, responses (N >= 2), scores (one per response, higher is better)",
        {"prompt": "prompt", "responses": "responses", "response_scores": "scores"},
        example=demo("ranked.jsonl"),
        init_default=True,
    ),
    Preset(
        "messages",
        RowKind.MESSAGES,
        "generative: a list of chat messages",
        {"messages": "messages"},
        example=demo("judge_messages.jsonl"),
        demo_name="judge-demo",
        demo_file="judge_messages.jsonl",
        init_default=True,
    ),
    Preset(
        "stepwise",
        RowKind.STEPS,
        "process: prompt, completions (steps), labels (bools): TRL's and trl-lib/math_shepherd's shape",
        {"prompt": "prompt", "steps": "completions", "step_labels": "labels"},
        example=demo("prm_steps.jsonl"),
        demo_name="prm-demo",
        demo_file="prm_steps.jsonl",
        init_default=True,
    ),
    Preset(
        "math-shepherd",
        RowKind.STEPS,
        "process: raw Math-Shepherd text with ки markers, labels as +/- in place of them",
        {"steps": "input", "step_labels": "label"},
        # The raw text with its ки markers; TRL's converted copy is trl-lib/math_shepherd (stepwise).
        dataset=hub("peiyi9979/Math-Shepherd"),
    ),
    Preset(
        "processbench",
        RowKind.STEPS,
        "process: problem, steps, label (index of the first wrong step, -1 for none)",
        {"prompt": "problem", "steps": "steps", "step_labels": "label"},
        example=demo("prm_processbench.jsonl"),
    ),
    Preset(
        "rlaif-v",
        RowKind.PAIRS,
        "vision pairs: image, question, chosen, rejected (RLAIF-V, VLFeedback-style binarized files); "
        "the image goes before the question",
        {"prompt": "question", "images": "image", **PAIR_COLUMNS},
        images_first=True,
        # The released RLAIF-V preference set (83k pairs, CC-BY-NC): `init --data rlaif-v` names it.
        dataset=hub("openbmb/RLAIF-V-Dataset"),
    ),
)
PRESETS: dict[str, Preset] = {p.name: p for p in TABLE}
NAMES: tuple[str, ...] = tuple(PRESETS)


def get(name: str | None) -> Preset | None:
    """The preset of that name; None for no preset (explicit columns)."""
    return PRESETS.get(name) if name is not None else None


def giving(rows: str) -> tuple[str, ...]:
    """The presets whose rows are `rows` as they stand (no option turning them into other rows)."""
    return tuple(p.name for p in TABLE if p.rows == rows)


def init_default(rows: str) -> str | None:
    """The preset `rmspec init --data FILE` writes for an approach that trains on `rows` (None: plain columns)."""
    return next((p.name for p in TABLE if p.rows == rows and p.init_default), None)


def rows_of(mapping: Any) -> RowKind | None:
    """The rows a mapping's preset gives, its options included (helpsteer2 with pair_by: pairs;
    ultrafeedback with binarize: ranked: lists); None without a preset."""
    preset = get(mapping.preset)
    if preset is None:
        return None
    if preset.pairs_by_attribute and mapping.pair_by is not None:
        return RowKind.PAIRS
    if preset.ranked_from is not None and mapping.binarize == "ranked":
        return RowKind.LIST
    return preset.rows


def usable(rows: str) -> list[str]:
    """The presets (with the option that makes them so) an approach training on `rows` can use."""
    found = list(giving(rows))
    if rows == RowKind.PAIRS:
        found += [f"{p.name} (with pair_by)" for p in TABLE if p.pairs_by_attribute]
    return found


def for_preference_file(row: Mapping[str, Any]) -> str:
    """The preset a preference file named without one is read with: message lists (its first row's
    chosen) as conversations, text as plain pairs (the `pairs` benchmark)."""
    return "conversational" if isinstance(row.get("chosen"), list) else "pairs"


def mismatch(mapping: Any, rows: str) -> RowKind | None:
    """The rows the mapping's preset gives where they are not `rows` (the approach's); else None.
    The one preset-versus-approach check: validate and the data stage both ask it."""
    given = rows_of(mapping)
    return given if given is not None and given != rows else None
