"""Issue 21's spec options: what validate and plan refuse, with the message that says what to write."""

from __future__ import annotations

import json

import pytest

from helpers.data import DEMO
from helpers.runs import rmspec

BASE = {
    "version": 1,
    "name": "t",
    "model": {"name_or_path": "sentence-transformers/all-MiniLM-L6-v2"},
    "data": {"source": {"kind": "files", "paths": [str(DEMO / "preferences.jsonl")]}, "mapping": {"preset": "pairs"}},
    "approach": {"kind": "bradley_terry"},
    "training": {"max_length": 128, "global_batch_size": 8},
    "hardware": {"device": "cpu"},
}


def _spec(tmp_path, approach=None, mapping=None, data=None):
    doc = json.loads(json.dumps(BASE))
    doc["approach"].update(approach or {})
    if mapping is not None:
        doc["data"]["mapping"] = mapping
    if data is not None:
        doc["data"]["source"]["paths"] = [str(data)]
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "approach, mapping, words",
    [
        ({"use_margin": True, "margin": "scale"}, None, "use_margin: true means margin: subtract"),
        ({"margin_map": {"1": 1}}, None, "margin_map is set but the margin is not used"),
        ({"margin": "scale"}, None, "no margin column is mapped"),
        ({"tie_nu": 0.5}, None, "tie_nu only applies with ties: davidson"),
        ({"sft_weight": 0.1}, None, "is an encoder"),
        ({"kind": "listwise"}, {"preset": "pairs"}, "use preset: ranked"),
        ({"kind": "listwise"}, {"preset": "ultrafeedback"}, "binarize: ranked"),
        ({}, {"preset": "ranked"}, "for listwise"),
    ],
)
def test_validate_refuses_with_the_fix(tmp_path, approach, mapping, words):
    done = rmspec("validate", str(_spec(tmp_path, approach, mapping)), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_plan_refuses_sft_on_an_encoder_by_its_config(tmp_path):
    # A name that does not look like an encoder passes validate's heuristic; the plan reads the shape.
    doc = _spec(tmp_path, {"sft_weight": 0.1})
    text = doc.read_text().replace("sentence-transformers/all-MiniLM-L6-v2", "my-org/reward-base")
    doc.write_text(
        text.replace(
            '"model": {',
            '"model": {"shape": {"architecture": "encoder", "num_parameters": '
            '22000000, "hidden_size": 384, "num_layers": 6, "num_attention_heads": 12, '
            '"intermediate_size": 1536, "vocab_size": 30522}, ',
        )
    )
    done = rmspec("plan", str(doc), cwd=tmp_path)
    assert done.returncode == 2 and "sft_weight" in done.stdout + done.stderr


def test_plan_sizes_listwise_rows_from_the_data(tmp_path):
    done = rmspec(
        "plan",
        str(_spec(tmp_path, {"kind": "listwise"}, {"preset": "ranked"}, DEMO / "ranked.jsonl")),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    n = max(len(json.loads(line)["responses"]) for line in (DEMO / "ranked.jsonl").read_text().splitlines()[:200])
    assert plan["sequences_per_example"] == n
    assert plan["packing"] == "off" and any("listwise" in w for w in plan["warnings"])
