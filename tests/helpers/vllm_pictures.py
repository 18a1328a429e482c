"""What `rmspec serve RUN --engine vllm` must answer for a vision-language reward model (shared by the family
tests: tests/test_export_vllm_vision.py, tests/test_export_vllm_idefics3.py), and the tiny Idefics3 reward run that
vLLM's CPU build hosts (tests/test_export_vllm_idefics3.py, bench/serve_engines_vision.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

IDEFICS3_SPEC = """\
version: 1
name: idefics3
model: {name_or_path: base}
data:
  source: {kind: files, paths: [train.jsonl]}
  mapping: {preset: pairs}
  split: {validation_source: {kind: files, paths: [heldout.jsonl]}}
approach: {kind: bradley_terry}
training: {max_steps: 2, learning_rate: 3.0e-3, global_batch_size: 4, max_length: 256, logging_steps: 1, seed: 0}
eval: {validation: true, benchmarks: []}
hardware: {device: cpu}
output: {dir: runs/idefics3, report: []}
"""


def train_idefics3(folder: Path) -> Path:
    """A tiny Idefics3 (text hidden 256 with 4 heads: head_dim 64, what vLLM's CPU attention takes; a 56 px tower)
    trained 2 steps by `rmspec run` on coloured pictures, in `folder`; returns the run directory. Its held-out
    pictures are 70 px: split into 2 x 2 tiles plus the global view."""
    from helpers.tiny_families import build_generation_checkpoint
    from rmspec.vision.demo import write_colour_pairs

    build_generation_checkpoint("idefics3", folder / "base", seed=0, hidden=256)
    write_colour_pairs(folder, "train", 8, seed=1, size=40)
    write_colour_pairs(folder, "heldout", 4, seed=2, size=70)
    (folder / "spec.yaml").write_text(IDEFICS3_SPEC)
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", "spec.yaml"], cwd=folder, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return folder / "runs" / "idefics3"


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
