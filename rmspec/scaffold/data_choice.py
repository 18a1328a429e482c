"""`rmspec init --data X`: the data.source and data.mapping a dataset name, a mapping preset, a hub
dataset id or a local file stands for.

The mapping presets, the dataset each is named for, their shipped demos and example sources are
rows of the preset table (rmspec.spec.presets): `--data NAME` writes `mapping.preset: NAME` with a
source in that layout, a shipped example file where rmspec has one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from rmspec.errors import RmspecError
from rmspec.scaffold.shipped import DEMO_DIR
from rmspec.spec import presets
from rmspec.spec.choices import did_you_mean
from rmspec.spec.data import PRESETS


def _source(entry: dict) -> dict:
    """A table source as a spec's data.source: a shipped demo file becomes its path."""
    if entry["kind"] == presets.DEMO:
        return {"kind": "files", "paths": [str(DEMO_DIR / entry["file"])]}
    return dict(entry)


# Known datasets by name (the shipped demos, then the datasets presets are named for): where they are
# and how they map.
DATASETS: dict[str, dict] = {
    **{
        p.demo_name: {"source": _source(presets.demo(p.demo_file)), "mapping": {"preset": p.name}}
        for p in presets.TABLE
        if p.demo_name and p.demo_file
    },
    **{
        p.name: {"source": _source(p.dataset), "mapping": {"preset": p.name, **p.dataset_mapping}}
        for p in presets.TABLE
        if p.dataset
    },
}

# A source in the layout of each preset that is not a dataset name above.
LAYOUT_EXAMPLES: dict[str, dict] = {p.name: _source(p.example) for p in presets.TABLE if p.example}
# Where a preset has no example, the spec names this file for the user to fill.
PLACEHOLDER = "train.jsonl"

FILE_SUFFIXES = (".json", ".jsonl", ".parquet", ".csv")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def names() -> list[str]:
    """Everything --data takes by name: the datasets, then the presets that are not also one."""
    return [*DATASETS, *(p for p in PRESETS if p not in DATASETS)]


def _default_mapping(approach: str, preset: str | None) -> dict:
    from rmspec import approaches

    preset = preset or approaches.get(approach).init_preset
    if preset is None:  # scores without a preset: the plain prompt/response/score columns
        return {"columns": {"prompt": "prompt", "response": "response", "scores": {"score": "score"}}}
    return {"preset": preset}


def _relative(target: Path, out_dir: Path) -> str:
    return os.path.relpath(target, out_dir.resolve())


def data_section(data: str, approach: str, out_dir: Path, preset: str | None = None) -> tuple[dict, str | None]:
    """(the data section's source and mapping, a note for the user or None)."""
    if preset is not None and preset not in PRESETS:
        from rmspec.spec.choices import unknown_choice

        raise RmspecError(unknown_choice("mapping preset", preset, PRESETS))
    if data in DATASETS or data in PRESETS:
        if preset is not None:
            raise RmspecError(
                f"--preset goes with a hub dataset id or a file, not with the name {data!r}",
                hint=f"--data {data} already says how the rows map",
            )
        if data in DATASETS:
            entry = DATASETS[data]
            section = {"source": dict(entry["source"]), "mapping": dict(entry["mapping"])}
        else:
            example = LAYOUT_EXAMPLES.get(data)
            source = dict(example) if example else {"kind": "files", "paths": [PLACEHOLDER]}
            section = {"source": source, "mapping": {"preset": data}}
            if example is None:
                return section, f"put your rows ({data} layout) in {PLACEHOLDER} next to the spec, or edit data.source"
        if "paths" in section["source"]:
            section["source"]["paths"] = list(section["source"]["paths"])
        return section, None
    path = Path(data)
    if path.suffix.lower() in FILE_SUFFIXES or any(c in data for c in "*?") or path.exists():
        rel = _relative(path.resolve(), out_dir) if path.exists() else data
        return {"source": {"kind": "files", "paths": [rel]}, "mapping": _default_mapping(approach, preset)}, None
    if HUB_ID.match(data):
        for entry in DATASETS.values():  # a known dataset named by its id maps as its name does
            if entry["source"].get("path", "").lower() == data.lower() and preset is None:
                return {"source": dict(entry["source"]), "mapping": dict(entry["mapping"])}, None
        mapping = _default_mapping(approach, preset)
        layout = mapping.get("preset") or "prompt/response/score columns"
        note = (
            f"{data} is read as the {layout} layout; check with `rmspec data preview SPEC`, "
            "and pick another with --preset or data.mapping.columns"
        )
        return {"source": presets.hub(data), "mapping": mapping}, note
    guess = did_you_mean(data, names())
    raise RmspecError(
        f"unknown data {data!r}" + (f"; did you mean {guess!r}?" if guess else ""),
        hint=f"--data takes a dataset ({', '.join(DATASETS)}), a mapping preset ({', '.join(PRESETS)}), "
        "a hub dataset id (org/name) or a local .jsonl/.json/.parquet/.csv file",
    )
