"""The composite's /get_reward in-process (the app `rmspec serve` builds): on_failure error answers
422 naming the component and counts the failed row on /metrics; routes pick the components per
query, as verl's data_source does through the exported compute_score."""

from __future__ import annotations

import pytest

from helpers.ci import need
from helpers.composite import FORMAT, write_composite_run
from helpers.serve_models import metric
from rmspec.composite.components.repetition import repetition_penalty

need("math_verify")
need("fastapi")


def client_for(run):
    from fastapi.testclient import TestClient

    from rmspec.inference.engine import load_scorer
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    return TestClient(create_app(Service(load_scorer(run), model_name="composite")))


SECTION = {
    "kind": "composite",
    "components": [
        {"name": "fmt", "kind": "regex", "pattern": FORMAT, "weight": 0.0},
        {"name": "math", "kind": "math_answer", "weight": 1.0, "timeout_s": 60},
        {"name": "rep", "kind": "repetition", "ngram": 2, "weight": 2.0},
    ],
    "gates": [{"component": "fmt", "floor": -1.0}],
}
GOOD = "<think>t</think><answer>$4$</answer>"
REPEATED = "a b a b a b"


def test_on_failure_error_answers_422(tmp_path):
    run = write_composite_run(tmp_path / "run", SECTION)  # on_failure: error (the default)
    with client_for(run) as client:
        ok = client.post("/get_reward", json={"query": ["q" + GOOD], "prompts": ["q"], "labels": ["4"]})
        assert ok.status_code == 200 and ok.json()["rewards"] == [1.0]
        answer = client.post(
            "/get_reward", json={"query": ["q" + GOOD, "q" + GOOD], "prompts": ["q", "q"], "labels": ["4", None]}
        )
        assert answer.status_code == 422
        message = answer.json()["error"]["message"]
        assert "query 1: component math failed: no_reference" in message and "on_failure" in message
        text = client.get("/metrics").content
    assert metric(text, "rmspec_composite_rows_failed_total") == 1.0
    assert metric(text, "rmspec_component_failures_total", component="math", reason="no_reference") == 1.0
    assert metric(text, "rmspec_component_rows_total", component="math") == 3.0


def test_routes_pick_the_components(tmp_path):
    section = {**SECTION, "route_by": "data_source", "routes": {"math": ["fmt", "math"]}, "default_route": ["rep"]}
    run = write_composite_run(tmp_path / "run", section)
    queries = ["q" + GOOD, "q" + REPEATED, "q" + REPEATED]
    body = {"query": queries, "prompts": ["q"] * 3, "labels": ["4", "4", None], "routes": ["math", "math", "chat"]}
    with client_for(run) as client:
        answer = client.post("/get_reward", json=body).json()
    # math rows: the gate and math-verify; the chat row: the repetition penalty alone (weight 2), no reference needed
    assert answer["rewards"] == pytest.approx([1.0, -1.0, 2.0 * repetition_penalty(REPEATED, 2, -1.0)])
    assert answer["extra_logs"]["rep"] == pytest.approx([0.0, 0.0, repetition_penalty(REPEATED, 2, -1.0)])
    assert answer["extra_logs"]["gated"] == [0.0, 1.0, 0.0]
