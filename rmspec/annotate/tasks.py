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

from rmspec.annotate.label_config import render_prompt
from rmspec.annotate.records import ID_FIELD, KIND_FIELD, PROMPT_FIELD, SWAP_FIELD
from rmspec.annotate.source import Source


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
    kind = source.task_kind
    tasks = []
    flags = swaps(len(source.items), seed)
    for item, swapped in zip(source.items, flags):
        data: dict[str, Any] = {"prompt": render_prompt(item["prompt"]), ID_FIELD: item["id"], KIND_FIELD: source.kind}
        if not isinstance(item["prompt"], str):
            data[PROMPT_FIELD] = item["prompt"]  # the conversation itself, for the training rows
        data.update(kind.task_data(item, swapped, source.attributes, source.scale))
        meta = {ID_FIELD: item["id"], KIND_FIELD: source.kind, "group": item.get("group", "")}
        if kind.swaps:
            meta[SWAP_FIELD] = swapped
        if item["id"] in selection:
            meta["rmspec_selection"] = selection[item["id"]]
        tasks.append({"data": data, "meta": meta})
    return tasks


def label_config(source: Source) -> str:
    return source.task_kind.label_config(source.attributes, source.scale)


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
