"""Runs of `rmspec run` in a subprocess on a tiny Llama: the spec, learnable pairs, the metrics written."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from helpers.models import build_model

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [pairs.jsonl]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: bradley_terry}}
training:
  learning_rate: 3.0e-3
  global_batch_size: {batch}
  max_length: 64
  logging_steps: 2
  seed: 7
{training}
hardware: {{device: cpu, gpus_per_node: {procs}}}
eval: {{validation: true, benchmarks: []}}
output: {{dir: {out}}}
"""


def write_pairs(path: Path, n: int, seed: int = 0) -> None:
    """Learnable pairs in the tiny vocabulary: the chosen answer starts with w1, the rejected with w2."""
    rng = random.Random(seed)
    with path.open("w") as handle:
        for i in range(n):
            words = lambda k: " ".join(f"w{rng.randint(10, 70)}" for _ in range(k))  # noqa: E731
            handle.write(
                json.dumps(
                    {
                        "id": f"r{i}",
                        "prompt": words(rng.randint(1, 8)),
                        "chosen": "w1 " + words(rng.randint(0, 5)),
                        "rejected": "w2 " + words(rng.randint(0, 5)),
                    }
                )
                + "\n"
            )


def make_run_spec(
    tmp: Path,
    *,
    name: str = "tiny",
    training: str = "  max_steps: 8",
    batch: int = 8,
    procs: int = 1,
    rows: int = 120,
    model: Path | None = None,
) -> Path:
    model = model or build_model("llama", tmp / "model-src")
    if not (tmp / "pairs.jsonl").exists():
        write_pairs(tmp / "pairs.jsonl", rows)
    spec = tmp / f"{name}.yaml"
    spec.write_text(
        SPEC.format(name=name, model=model, batch=batch, procs=procs, training=training, out=tmp / "runs" / name)
    )
    return spec


def rmspec(*args: str, cwd: Path, timeout: int = 300, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def metrics_rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
