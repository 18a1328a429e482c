"""Options that were accepted and did nothing are refused with a message that says what to write."""

from __future__ import annotations

import json

import pytest

from rmspec.errors import SpecError
from rmspec.spec import load_spec


def spec(tmp_path, **sections):
    (tmp_path / "d.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n")
    doc = {
        "version": 1,
        "name": "t",
        "model": {"name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"},
        "data": {"source": {"kind": "files", "paths": ["d.jsonl"]}, "mapping": {"preset": "messages"}},
        "approach": {"kind": "generative"},
        "hardware": {"device": "cpu"},
        **sections,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(doc))
    return path


def refused(path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def test_report_json_is_refused_results_json_is_always_written(tmp_path):
    text = refused(spec(tmp_path, output={"report": ["console", "html", "json"]}))
    assert "results.json is always written" in text and "output.report" in text
    assert load_spec(spec(tmp_path, output={"report": ["html"]})).spec.output.report == ["html"]
    assert load_spec(spec(tmp_path)).spec.output.report == ["console", "html"]


def test_generative_output_score_is_refused(tmp_path):
    text = refused(spec(tmp_path, approach={"kind": "generative", "output": "score"}))
    assert "verdict" in text and "approach.output" in text
    assert (
        load_spec(spec(tmp_path, approach={"kind": "generative", "output": "verdict"})).spec.approach.output
        == "verdict"
    )
