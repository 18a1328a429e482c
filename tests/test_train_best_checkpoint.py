"""training.final_model: best, on a run whose validation peaks before the last step.

The validation set follows the training rule (w1 beats w2) on 70% of its pairs and is flipped on 30%: its
loss falls while the margins grow towards log(0.7/0.3) and rises once training pushes them far past it, and
its accuracy falls from its first values as the model commits to the rule. RUN/model must be the checkpoint
of the step with the lowest eval/rm/loss in metrics.jsonl, score exactly as that checkpoint does, and
status.json, the console summary and report.html must name that step and why.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from safetensors.torch import load_file

from helpers.runs import make_run_spec, metrics_rows, rmspec

pytestmark = pytest.mark.slow
METRIC = "eval/rm/loss"


def write_validation(path: Path, n: int = 40, flipped_per_10: int = 3) -> None:
    rng = random.Random(5)
    with path.open("w") as handle:
        for i in range(n):
            words = lambda k: " ".join(f"w{rng.randint(10, 70)}" for _ in range(k))  # noqa: E731
            chosen, rejected = "w1 " + words(rng.randint(0, 5)), "w2 " + words(rng.randint(0, 5))
            if i % 10 < flipped_per_10:
                chosen, rejected = rejected, chosen
            handle.write(
                json.dumps({"id": f"v{i}", "prompt": words(rng.randint(1, 8)), "chosen": chosen, "rejected": rejected})
                + "\n"
            )


@pytest.fixture(scope="module")
def best_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("best")
    write_validation(tmp / "val.jsonl")
    spec = make_run_spec(
        tmp, name="best", training=f"  max_steps: 12\n  eval_steps: 1\n  final_model: best\n  best_metric: {METRIC}"
    )
    text = (
        spec.read_text()
        .replace("learning_rate: 3.0e-3", "learning_rate: 1.0e-2")
        .replace(
            "split: {validation_fraction: 0.2, seed: 0}",
            "split: {validation_source: {kind: files, paths: [val.jsonl]}}",
        )
    )
    spec.write_text(text)
    done = rmspec("run", str(spec), cwd=tmp, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tmp, tmp / "runs" / "best", done.stdout


def periodic_evaluations(run: Path) -> dict[int, dict]:
    """The evaluations every eval_steps (the final one, marked by model_step, left out)."""
    return {r["step"]: r for r in metrics_rows(run) if METRIC in r and "model_step" not in r}


def test_the_selected_step_is_the_metrics_minimum_before_the_last_step(best_run):
    _, run, _ = best_run
    evaluations = periodic_evaluations(run)
    assert sorted(evaluations) == list(range(1, 13))
    losses = {step: r[METRIC] for step, r in evaluations.items()}
    best_step = min(losses, key=lambda s: (losses[s], s))  # Trainer keeps the first of equal values
    assert best_step < 12 and losses[12] > losses[best_step] + 0.1  # it peaks well before the last step
    accuracy = {step: r["eval/rm/accuracy"] for step, r in evaluations.items()}
    assert accuracy[best_step] > accuracy[12]  # and validation accuracy is higher there than at the end

    facts = json.loads((run / "status.json").read_text())["final_model"]
    assert facts["kind"] == "best" and facts["metric"] == METRIC
    assert facts["step"] == best_step
    assert facts["value"] == pytest.approx(losses[best_step], abs=1e-9)
    assert Path(facts["checkpoint"]).name == f"checkpoint-{best_step}"
    assert f"at step {best_step}" in facts["why"] and "lowest" in facts["why"]


def test_run_model_is_the_best_checkpoint_weight_for_weight_and_score_for_score(best_run):
    tmp, run, _ = best_run
    step = json.loads((run / "status.json").read_text())["final_model"]["step"]
    best, last = run / "checkpoints" / f"checkpoint-{step}", run / "checkpoints" / "checkpoint-12"
    model = load_file(run / "model" / "model.safetensors")
    selected = load_file(best / "model.safetensors")
    assert set(model) == set(selected)
    assert all((model[k] == selected[k]).all() for k in model)
    final = load_file(last / "model.safetensors")
    assert any(not (model[k] == final[k]).all() for k in model)  # the last step's weights are not what was kept

    scored = {}
    for name, target in (("model", run / "model"), ("best", best), ("last", last)):
        out = tmp / f"{name}.scored.jsonl"
        done = rmspec("score", str(target), str(tmp / "val.jsonl"), "--out", str(out), "--json", cwd=tmp)
        assert done.returncode == 0, done.stderr[-2000:]
        scored[name] = [
            (r["reward_chosen"], r["reward_rejected"]) for r in map(json.loads, out.read_text().splitlines())
        ]
    assert len(scored["model"]) == 40
    assert scored["model"] == scored["best"]  # exactly, not approximately
    assert scored["model"] != scored["last"]


def test_the_final_evaluation_ran_on_the_selected_checkpoint(best_run):
    _, run, _ = best_run
    step = json.loads((run / "status.json").read_text())["final_model"]["step"]
    periodic = periodic_evaluations(run)[step]
    (final,) = [r for r in metrics_rows(run) if "model_step" in r]
    assert final["model_step"] == step and final["step"] == 12
    for key in (METRIC, "eval/rm/accuracy", "eval/rm/reward_margin"):
        assert final[key] == pytest.approx(periodic[key], rel=1e-5, abs=1e-6), key
    results = json.loads((run / "results.json").read_text())
    assert results["validation"]["overall"] == pytest.approx(periodic["eval/rm/accuracy"], abs=1e-9)


def test_the_console_and_the_report_say_which_step_and_why(best_run):
    _, run, stdout = best_run
    facts = json.loads((run / "status.json").read_text())["final_model"]
    line = f"Model: the best checkpoint, step {facts['step']}"
    assert line in stdout and facts["why"] in stdout
    html = (run / "report.html").read_text()
    assert line in html and facts["why"] in html
