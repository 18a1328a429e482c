"""`rmspec init`: a commented spec from templates/, for an approach, a data preset and a model."""

from __future__ import annotations

import os
from pathlib import Path

from rmspec.errors import RmspecError
from rmspec.spec.choices import unknown_choice

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
DEMO_DIR = Path(__file__).resolve().parents[1] / "data" / "demo"
SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "rmspec.schema.json"
APPROACHES = ("bradley_terry", "pointwise", "generative", "process")

# --data names: known datasets and how they map. A path to a file is taken as plain pairs
# (or messages for the generative approach).
DATA_PRESETS: dict[str, dict] = {
    "demo": {"source": {"kind": "files", "paths": ["<demo>/preferences.jsonl"]}, "mapping": {"preset": "pairs"}},
    "hh-rlhf": {
        "source": {"kind": "huggingface", "path": "Anthropic/hh-rlhf", "data_dir": "helpful-base", "split": "train"},
        "mapping": {"preset": "hh-rlhf"},
    },
    "ultrafeedback-binarized": {
        "source": {"kind": "huggingface", "path": "trl-lib/ultrafeedback_binarized", "split": "train"},
        "mapping": {"preset": "conversational"},
    },
    "ultrafeedback": {
        "source": {"kind": "huggingface", "path": "openbmb/UltraFeedback", "split": "train"},
        "mapping": {"preset": "ultrafeedback", "binarize": "best_vs_worst"},
    },
    "shp": {
        "source": {"kind": "huggingface", "path": "stanfordnlp/SHP", "split": "train"},
        "mapping": {"preset": "shp"},
    },
    "helpsteer2": {
        "source": {"kind": "huggingface", "path": "nvidia/HelpSteer2", "split": "train"},
        "mapping": {"preset": "helpsteer2"},
    },
    "judge-demo": {"source": {"kind": "files", "paths": ["<demo>/judge_messages.jsonl"]}, "mapping": {"preset": "messages"}},
    "prm-demo": {"source": {"kind": "files", "paths": ["<demo>/prm_steps.jsonl"]}, "mapping": {"preset": "stepwise"}},
    "math-shepherd": {"source": {"kind": "huggingface", "path": "trl-lib/math_shepherd", "split": "train"},
                      "mapping": {"preset": "stepwise"}},
}


def _relative(target: Path, out_dir: Path) -> str:
    return os.path.relpath(target, out_dir.resolve())


def _data_section(data: str, approach: str, out_dir: Path) -> dict:
    if data in DATA_PRESETS:
        section = {k: dict(v) for k, v in DATA_PRESETS[data].items()}
        section["source"] = dict(section["source"])
        if "paths" in section["source"]:
            section["source"]["paths"] = [
                _relative(Path(p.replace("<demo>", str(DEMO_DIR))), out_dir) for p in section["source"]["paths"]
            ]
        if data == "helpsteer2" and approach == "bradley_terry":
            section["mapping"]["pair_by"] = "helpfulness"
        return section
    path = Path(data)
    if path.suffix.lower() not in (".json", ".jsonl", ".parquet", ".csv") and not any(c in data for c in "*?"):
        raise RmspecError(
            unknown_choice("data preset", data, DATA_PRESETS),
            hint="or give a path to a .jsonl/.json/.parquet/.csv file",
        )
    rel = data if not path.exists() else _relative(path.resolve(), out_dir)
    preset = {"generative": "messages", "pointwise": None, "process": "stepwise"}.get(approach, "pairs")
    mapping: dict = {"preset": preset} if preset else {
        "columns": {"prompt": "prompt", "response": "response", "scores": {"score": "score"}}
    }
    return {"source": {"kind": "files", "paths": [rel]}, "mapping": mapping}


def build_document(approach: str, data: str | None, model: str | None, out_dir: Path, name: str | None = None) -> dict:
    from rmspec.spec.yaml_io import read_yaml_file

    if approach not in APPROACHES:
        raise RmspecError(unknown_choice("approach", approach, APPROACHES))
    doc, _ = read_yaml_file(TEMPLATES / f"{approach}.yaml")
    if data is not None:
        section = _data_section(data, approach, out_dir)
        doc["data"]["source"] = section["source"]
        doc["data"]["mapping"] = section["mapping"]
        if approach == "pointwise" and "columns" in section["mapping"]:
            doc["approach"]["attributes"] = ["score"]
    else:  # the template's relative demo paths are relative to templates/
        source = doc["data"]["source"]
        if "paths" in source:
            source["paths"] = [_relative((TEMPLATES / p).resolve(), out_dir) for p in source["paths"]]
    for bench in doc.get("eval", {}).get("benchmarks", []) or []:  # demo benchmark files, likewise
        if bench.get("path", "").startswith("../"):
            bench["path"] = _relative((TEMPLATES / bench["path"]).resolve(), out_dir)
    if model is not None:
        doc["model"]["name_or_path"] = model
    if name is not None:
        doc["name"] = name
    return doc


def render_spec(doc: dict, out_dir: Path) -> str:
    from rmspec.scaffold.comments import commented_yaml
    from rmspec.spec import Spec

    schema_ref = _relative(SCHEMA, out_dir)
    header = (
        f"# yaml-language-server: $schema={schema_ref}\n"
        "# Written by `rmspec init`. Check it with `rmspec validate`, size it with `rmspec plan`.\n"
    )
    return commented_yaml(doc, Spec, header)
