"""`rmspec annotate export` on a process spec writes per-step labelling tasks (it crashed with
KeyError 'chosen'); on a generative spec it exits 2 naming the approaches it supports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from helpers.ci import need

need("datasets")

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rmspec" / "data" / "demo" / "prm_steps.jsonl"


def test_process_spec_exports_per_step_tasks(tmp_path, cli):
    out = tmp_path / "ls"
    result = cli("annotate", "export", REPO / "specs" / "quickstart_prm.yaml", "--out", out)
    assert result.code == 0, result.out + result.err
    tasks = json.loads((out / "tasks.json").read_text())
    source = [json.loads(x) for x in DEMO.read_text().splitlines() if x.strip()]
    assert 0 < len(tasks) <= len(source)
    by_id = {r["id"]: r for r in source}
    for task in tasks:
        data, meta = task["data"], task["meta"]
        assert meta["rmspec_kind"] == "process" and data["rmspec_kind"] == "process"
        row = by_id[meta["rmspec_id"]]
        assert data["prompt"] == row["prompt"]
        # every step shown, numbered, in order; the source's own labels kept for audits
        assert [p["text"] for p in data["steps"]] == row["completions"]
        assert [p["step"] for p in data["steps"]] == [f"step {i + 1}" for i in range(len(row["completions"]))]
        assert data["rmspec_step_labels"] == [int(v) for v in row["labels"]]
    config = ET.fromstring((out / "label_config.xml").read_text())
    paragraphs = config.find("Paragraphs")
    assert paragraphs is not None and paragraphs.get("value") == "$steps"
    number = config.find("Number")
    assert number is not None and number.get("toName") == "steps" and number.get("min") == "0"


def test_generative_spec_names_what_is_supported(tmp_path, cli):
    spec = tmp_path / "judge.yaml"
    spec.write_text(
        "version: 1\nname: j\nmodel: {name_or_path: Qwen/Qwen2.5-0.5B-Instruct}\n"
        f"data: {{source: {{kind: files, paths: [{DEMO}]}}, mapping: {{preset: messages}}}}\n"
        "approach: {kind: generative}\n"
    )
    result = cli("annotate", "export", spec, "--out", tmp_path / "ls")
    assert result.code == 2, result.out + result.err
    for kind in ("bradley_terry", "pointwise", "process"):
        assert kind in result.err


def test_select_on_process_tasks_is_refused(tmp_path, cli):
    result = cli(
        "annotate",
        "export",
        REPO / "specs" / "quickstart_prm.yaml",
        "--out",
        tmp_path / "ls",
        "--select",
        "random",
        "--n",
        "2",
    )
    assert result.code == 2 and "--select" in result.err and "process" in result.err, result.out + result.err


def test_import_of_process_tasks_says_it_is_not_supported(tmp_path, cli):
    out = tmp_path / "ls"
    assert cli("annotate", "export", REPO / "specs" / "quickstart_prm.yaml", "--out", out).code == 0
    tasks = json.loads((out / "tasks.json").read_text())[:2]
    for i, task in enumerate(tasks):
        task["id"] = i + 1
        task["annotations"] = [
            {
                "id": i + 10,
                "completed_by": 1,
                "result": [{"from_name": "first_error", "to_name": "steps", "type": "number", "value": {"number": 0}}],
            }
        ]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks))
    result = cli("annotate", "import", export, "--out", tmp_path / "rows.jsonl")
    assert result.code == 2 and "per-step" in result.err, result.out + result.err
    agreement = cli("annotate", "agreement", export)
    assert agreement.code in (0, 2), agreement.out + agreement.err  # a report or a clear refusal, not a crash
