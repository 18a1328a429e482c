"""Label Studio tasks (the import format: a list of `{"data": {...}, "meta": {...}}`).

Position bias: each pair is shown with A and B in a seeded random order, balanced (half the
tasks swapped, to within one). The swap and the source row id ride in `meta` (the documented
place, kept by the JSON export) AND in `data` (`rmspec_id`, `rmspec_swap`): Label Studio's
JSON_MIN and CSV exports drop `meta` but keep every data field, so the importer can undo the
swap from either export. The label config never shows these fields to the annotator.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from rmspec.annotate.label_config import pairwise_config, pointwise_config, process_config, render_prompt
from rmspec.annotate.source import PAIRWISE, PROCESS, Source

ID_FIELD, SWAP_FIELD, KIND_FIELD = "rmspec_id", "rmspec_swap", "rmspec_kind"
PROMPT_FIELD, SCALE_FIELD, ATTRIBUTES_FIELD, LABEL_FIELD = (
    "rmspec_prompt",
    "rmspec_scale",
    "rmspec_attributes",
    "rmspec_label",
)
STEP_LABELS_FIELD = "rmspec_step_labels"


def swaps(n: int, seed: int) -> list[bool]:
    """n swap flags, half of them True (to within one), in a seeded random order."""
    flags = [i % 2 == 1 for i in range(n)]
    random.Random(seed).shuffle(flags)
    return flags


def make_tasks(
    source: Source, seed: int = 0, selection: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Tasks for every item of ``source``; ``selection`` (id -> scores) goes into meta for the audit."""
    selection = selection or {}
    tasks = []
    flags = swaps(len(source.items), seed)
    for item, swapped in zip(source.items, flags):
        data: dict[str, Any] = {"prompt": render_prompt(item["prompt"]), ID_FIELD: item["id"], KIND_FIELD: source.kind}
        if not isinstance(item["prompt"], str):
            data[PROMPT_FIELD] = item["prompt"]  # the conversation itself, for the training rows
        if source.kind == PAIRWISE:
            a, b = (item["second"], item["first"]) if swapped else (item["first"], item["second"])
            data.update(response_a=a, response_b=b, **{SWAP_FIELD: swapped})
            if item.get("label"):
                data[LABEL_FIELD] = item["label"]  # the source's own label, for `disagree` audits
        elif source.kind == PROCESS:  # one paragraph per step, numbered as the annotator counts them
            data["steps"] = [{"step": f"step {i + 1}", "text": s} for i, s in enumerate(item["steps"])]
            if item.get("step_labels") is not None:
                data[STEP_LABELS_FIELD] = [int(v) for v in item["step_labels"]]  # the source's, for audits
        else:
            assert source.scale is not None  # a pointwise source has its rating scale (load_source)
            data.update(
                response=item["response"], **{SCALE_FIELD: list(source.scale), ATTRIBUTES_FIELD: source.attributes}
            )
        meta = {ID_FIELD: item["id"], KIND_FIELD: source.kind, "group": item.get("group", "")}
        if source.kind == PAIRWISE:
            meta[SWAP_FIELD] = swapped
        if item["id"] in selection:
            meta["rmspec_selection"] = selection[item["id"]]
        tasks.append({"data": data, "meta": meta})
    return tasks


def label_config(source: Source) -> str:
    if source.kind == PAIRWISE:
        return pairwise_config()
    if source.kind == PROCESS:
        return process_config()
    assert source.scale is not None  # a pointwise source has its rating scale (load_source)
    return pointwise_config(source.attributes, source.scale)


def write_export(
    source: Source, out_dir: str | Path, seed: int = 0, selection: dict[str, dict[str, Any]] | None = None
) -> tuple[Path, Path, list[dict[str, Any]]]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = make_tasks(source, seed, selection)
    config = label_config(source)
    from rmspec.rundir import atomic_write_text

    tasks_path, config_path = out / "tasks.json", out / "label_config.xml"
    atomic_write_text(tasks_path, json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(config_path, config)
    return tasks_path, config_path, tasks
