"""LoRA under hardware.context_parallel: 2: `rmspec run` on two gloo processes, each row split over both,
equals the one-process LoRA run: the same loss and gradient norm at every step and the same saved weights
(the adapters merged), within 1e-5. SGD and no clipping, as tests/test_context_parallel_run.py explains:
equal gradients then give equal weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from helpers.context_parallel import split_spec
from helpers.models import build_model
from helpers.runs import metrics_rows, rmspec

TRAINING = "  max_steps: 3\n  micro_batch_size: 2\n  optimizer: sgd\n  max_grad_norm: 1000.0"
LORA = "  lora: {r: 4, alpha: 8, dropout: 0.0, target_modules: [q_proj, v_proj]}"


def _lora_spec(tmp: Path, name: str, procs: int, model: Path) -> Path:
    model_line = f"model: {{name_or_path: {model}}}"
    edits = {"logging_steps: 2": "logging_steps: 1", model_line: f"model:\n  name_or_path: {model}\n{LORA}"}
    return split_spec(tmp, name, procs, model, TRAINING, edits)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cp-lora")
    model = build_model("llama", tmp / "model-src")
    for name, procs in (("one", 1), ("split", 2)):
        done = rmspec("run", str(_lora_spec(tmp, name, procs, model)), cwd=tmp, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    return {"one": tmp / "runs" / "one", "split": tmp / "runs" / "split", "base": model}


def _steps(run: Path) -> dict[int, tuple[float, float]]:
    return {r["step"]: (r["train/rm/loss"], r["grad_norm"]) for r in metrics_rows(run) if "train/rm/loss" in r}


def test_the_split_lora_run_is_the_one_process_run(runs):
    plan = json.loads((runs["split"] / "plan.json").read_text())
    assert plan["context_parallel"]["degree"] == 2 and not plan["context_parallel"].get("refused")
    one, split = _steps(runs["one"]), _steps(runs["split"])
    assert sorted(one) == sorted(split) == [1, 2, 3]
    for step in one:
        assert split[step] == pytest.approx(one[step], abs=1e-5), step
    a, b = (
        load_file(runs["one"] / "model" / "model.safetensors"),
        load_file(runs["split"] / "model" / "model.safetensors"),
    )
    assert sorted(a) == sorted(b)
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5


def test_only_the_adapters_and_the_head_moved(runs):
    """LoRA trained (q and v differ from the base, merged), and nothing else but the score head (which the base
    folder does not have: a fresh one, trained) moved."""
    from transformers import AutoModelForSequenceClassification

    base = AutoModelForSequenceClassification.from_pretrained(runs["base"]).state_dict()
    trained = load_file(runs["split"] / "model" / "model.safetensors")
    moved = {k for k in trained if k in base and not (trained[k] - base[k]).abs().max().item() < 1e-7}
    assert any("q_proj" in k for k in moved) and any("v_proj" in k for k in moved), moved
    assert all(("q_proj" in k or "v_proj" in k or k.startswith("score.")) for k in moved), moved
