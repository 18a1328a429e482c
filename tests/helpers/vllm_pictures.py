"""What `rmspec serve RUN --engine vllm` must answer for a vision-language reward model (shared by the family
tests: tests/test_export_vllm_vision.py, tests/test_export_vllm_idefics3.py)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest


def assert_served_as_scored(server, bodies: list[dict], expected: list[float], too_long: dict, tol: float) -> None:
    """/classify, /pooling and 8 clients at once answer `bodies` (image_url messages) with `expected` (rmspec
    score's normalised rewards); `too_long` (past max_length with its visual tokens) is a 400 naming --engine
    torch, and the next request is still answered."""
    got = [server.post("/classify", body) for body in bodies]
    assert all(status == 200 for status, _, _ in got), got
    classify = [body["data"][0]["probs"][0] for _, body, _ in got]
    pooled = [server.post("/pooling", {**b, "task": "classify"})[1]["data"][0]["data"][0] for b in bodies]
    with ThreadPoolExecutor(8) as pool:
        together = [r[1]["data"][0]["probs"][0] for r in pool.map(lambda b: server.post("/classify", b), bodies)]
    print({"classify": max(abs(a - b) for a, b in zip(classify, expected))})
    for values in (classify, pooled, together):
        assert values == pytest.approx(expected, abs=tol)
    status, body, _ = server.post("/classify", too_long)
    assert status == 400 and "--engine torch" in json.dumps(body), body
    assert server.post("/classify", bodies[0])[0] == 200
