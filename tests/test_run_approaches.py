"""`rmspec run` with the pointwise and generative approaches on tiny models, through the data
pipeline, accelerate launch and the final save."""

from __future__ import annotations

import json
import random
from pathlib import Path

from helpers.models import build_model
from helpers.runs import rmspec

POINTWISE = """version: 1
name: pw
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [scores.jsonl]}}
  mapping: {{columns: {{prompt: prompt, response: response, scores: {{helpfulness: h, verbosity: v}}}}}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: pointwise, attributes: [helpfulness, verbosity], weights: {{helpfulness: 1.0, verbosity: -0.5}}}}
training: {{max_steps: 30, learning_rate: 1.0e-2, global_batch_size: 16, max_length: 64, logging_steps: 10}}
hardware: {{device: cpu}}
eval: {{benchmarks: []}}
output: {{dir: {out}}}
"""

GENERATIVE = """version: 1
name: judge
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [judge.jsonl]}}
  mapping: {{preset: messages}}
  split: {{validation_fraction: 0.1, seed: 0}}
approach: {{kind: generative, verdict_pattern: 'w5 (w1|w2)', max_new_tokens: 6}}
training: {{max_steps: 60, learning_rate: 1.0e-2, global_batch_size: 16, max_length: 64, logging_steps: 20}}
hardware: {{device: cpu}}
eval: {{benchmarks: []}}
output: {{dir: {out}}}
"""


def test_pointwise_run(tmp_path):
    rng = random.Random(0)
    with (tmp_path / "scores.jsonl").open("w") as handle:
        for _ in range(200):
            h, v = rng.randint(0, 4), rng.randint(0, 4)
            words = ["w1"] * h + ["w2"] * v + [f"w{rng.randint(10, 70)}" for _ in range(2)]
            rng.shuffle(words)
            handle.write(
                json.dumps({"prompt": f"w{rng.randint(10, 20)}", "response": " ".join(words), "h": h, "v": v}) + "\n"
            )
    model = build_model("bert", tmp_path / "bert")
    spec = tmp_path / "pw.yaml"
    spec.write_text(POINTWISE.format(model=model, out=tmp_path / "runs" / "pw"))
    done = rmspec("run", str(spec), cwd=tmp_path)
    run = tmp_path / "runs" / "pw"
    assert done.returncode == 0, done.stdout + done.stderr + _log(run)
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed"
    metrics = status["metrics"]
    for name in ("helpfulness", "verbosity"):
        assert {f"eval/rm/{name}/{m}" for m in ("mse", "mae", "pearson", "spearman")} <= set(metrics)
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["id2label"] == {"0": "helpfulness", "1": "verbosity"}
    assert config["rmspec"]["attributes"] == ["helpfulness", "verbosity"]
    assert config["rmspec"]["weights"] == {"helpfulness": 1.0, "verbosity": -0.5}


def test_generative_run(tmp_path):
    rng = random.Random(0)
    with (tmp_path / "judge.jsonl").open("w") as handle:
        for _ in range(240):
            side = rng.random() < 0.5
            prompt = ("w3 " if side else "w4 ") + " ".join(f"w{rng.randint(10, 70)}" for _ in range(3))
            reply = "w5 w1" if side else "w5 w2"
            handle.write(
                json.dumps({"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]})
                + "\n"
            )
    model = build_model("llama", tmp_path / "llama", causal=True)
    spec = tmp_path / "judge.yaml"
    spec.write_text(GENERATIVE.format(model=model, out=tmp_path / "runs" / "judge"))
    done = rmspec("run", str(spec), cwd=tmp_path)
    run = tmp_path / "runs" / "judge"
    assert done.returncode == 0, done.stdout + done.stderr + _log(run)
    status = json.loads((run / "status.json").read_text())
    metrics = status["metrics"]
    assert metrics["eval/sft/n"] == 24
    assert metrics["eval/sft/parse_rate"] >= 0.9 and metrics["eval/sft/agreement"] >= 0.9
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("train/sft/loss" in r and "train/sft/token_accuracy" in r for r in rows)
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(run / "model") is not None


def _log(run: Path) -> str:
    path = run / "train.log"
    return path.read_text()[-4000:] if path.exists() else ""
