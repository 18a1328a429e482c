"""Issue 21's options end to end: `rmspec run` on a tiny Llama for a few steps, then `rmspec score`
on the saved model (a plain sequence classifier whatever trained it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from helpers.models import build_model
from helpers.runs import metrics_rows, rmspec
from helpers.serving import served_rewards

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}{init}}}
data:
  source: {{kind: files, paths: [{data}]}}
  mapping: {mapping}
  split: {{validation_fraction: 0.25, seed: 0}}
approach: {approach}
training: {{max_steps: 4, learning_rate: {lr}, global_batch_size: 8, max_length: 64, logging_steps: 1, seed: 7}}
hardware: {{device: cpu}}
eval: {{validation: true, benchmarks: []}}
output: {{dir: {out}}}
"""


def _words(rng: random.Random, k: int) -> str:
    return " ".join(f"w{rng.randint(10, 70)}" for _ in range(k))


def write_data(folder: Path) -> None:
    rng = random.Random(0)
    pairs, ranked, scored = [], [], []
    for i in range(48):
        prompt = _words(rng, rng.randint(1, 6))
        tie = i % 5 == 0
        pairs.append(
            {
                "id": f"p{i}",
                "prompt": prompt,
                "chosen": "w1 " + _words(rng, 3),
                "rejected": ("w1 " if tie else "w2 ") + _words(rng, 3),
                "tie": tie,
                "strength": rng.choice([1, 2, 3]),
            }
        )
        n = rng.choice([3, 4])
        quality = rng.sample(range(5), n)
        ranked.append(
            {
                "id": f"r{i}",
                "prompt": prompt,
                "responses": [" ".join(["w1"] * q) + " " + _words(rng, 2) for q in quality],
                "scores": quality,
            }
        )
        q = rng.randint(0, 4)
        scored.append({"prompt": prompt, "response": " ".join(["w1"] * q) + " " + _words(rng, 2), "helpfulness": q})
    for name, rows in (("pairs.jsonl", pairs), ("ranked.jsonl", ranked), ("scored.jsonl", scored)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recipes")
    write_data(folder)
    return folder, build_model("llama", folder / "llama", causal=True)


def _run(work, name, approach, data="pairs.jsonl", mapping="{preset: pairs}", init="", lr="3.0e-3"):
    folder, model = work
    spec = folder / f"{name}.yaml"
    spec.write_text(
        SPEC.format(
            name=name,
            model=model,
            init=init,
            data=data,
            mapping=mapping,
            approach=approach,
            out=folder / "runs" / name,
            lr=lr,
        )
    )
    done = rmspec("run", str(spec), cwd=folder, timeout=600)
    run = folder / "runs" / name
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed"
    return run, status, done


def _scores(work, run) -> list[dict]:
    folder, _ = work
    out = folder / f"{run.name}-scored.jsonl"
    done = rmspec("score", str(run / "model"), str(folder / "pairs.jsonl"), "--out", str(out), cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 48 and all(isinstance(r["reward_chosen"], float) for r in rows)
    _served_equals_scored(run, rows[:6])
    return rows


def _served_equals_scored(run: Path, scored: list[dict]) -> None:
    """`rmspec serve RUN` answers by the reward `rmspec score` wrote for the same prompt and response."""
    source = {r["id"]: r for r in map(json.loads, (run.parent.parent / "pairs.jsonl").read_text().splitlines())}
    served = served_rewards(run, [(source[r["id"]]["prompt"], source[r["id"]]["chosen"]) for r in scored])
    assert served == pytest.approx([r["reward_chosen"] for r in scored], abs=1e-5)


def _plain_classifier(run: Path) -> None:
    """The saved model loads in plain transformers, holds nothing but the classifier's tensors."""
    from safetensors import safe_open
    from transformers import AutoModelForSequenceClassification

    with safe_open(str(run / "model" / "model.safetensors"), "pt") as fh:
        assert not [k for k in fh.keys() if k.startswith("rmspec_")]  # noqa: SIM118 (safe_open is not iterable)
    model = AutoModelForSequenceClassification.from_pretrained(run / "model")
    assert model.config.num_labels == 1


def test_listwise_plackett_luce(work):
    run, status, _ = _run(
        work, "listwise", "{kind: listwise, top_k: 3}", data="ranked.jsonl", mapping="{preset: ranked}"
    )
    assert {"eval/rm/accuracy", "eval/rm/kendall_tau"} <= set(status["metrics"])
    report = json.loads((run / "data_report.json").read_text())
    assert report["rows_kept"] == 48
    _plain_classifier(run)
    _scores(work, run)


def _tensors(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def _first_step(run: Path) -> dict:
    return next(r for r in metrics_rows(run) if r.get("step") == 1 and "train/rm/loss" in r)


@pytest.fixture(scope="module")
def plain_bt(work):
    """Plain Bradley-Terry on pairs.jsonl (its ties rejected): the unscaled twin of the scaled run."""
    return _run(work, "ties_reject", "{kind: bradley_terry}")


def test_ties_rejected_by_default_and_trained_by_davidson(work, plain_bt):
    run, status, _ = plain_bt
    report = json.loads((run / "data_report.json").read_text())
    assert report["rejected"] == {"tie": 10}  # every fifth of 48 rows
    run, status, _ = _run(work, "davidson", "{kind: bradley_terry, ties: davidson}")
    assert json.loads((run / "data_report.json").read_text())["rows_kept"] == 48
    assert {"eval/rm/tie_brier", "eval/rm/tie_nu", "eval/rm/p_tie_on_ties"} <= set(status["metrics"])
    assert status["metrics"]["eval/rm/tie_nu"] != pytest.approx(1.0)  # nu was learned
    _plain_classifier(run)
    _scores(work, run)


def test_scaled_margin_with_margin_map(work, plain_bt):
    """Same rows, seed and first batch as the plain run: at step 1 (the same weights, the same rewards) the scaled
    loss is mean(d * l) with every d in {1, 3, 10} (strengths 1/2/3 remapped), so it lies strictly above the plain
    mean(l) and at most 10 times it; after training the weights differ."""
    run, status, _ = _run(
        work,
        "scaled",
        "{kind: bradley_terry, margin: scale, margin_map: {1: 1, 2: 3, 3: 10}}",
        mapping="{preset: pairs, columns: {margin: strength}}",
    )
    assert "eval/rm/accuracy" in status["metrics"]
    plain, scaled = _first_step(plain_bt[0]), _first_step(run)
    for same in ("train/rm/chosen_rewards", "train/rm/rejected_rewards"):
        assert scaled[same] == pytest.approx(plain[same], abs=1e-6), same  # the same weights and batch
    assert plain["train/rm/loss"] < scaled["train/rm/loss"] <= 10 * plain["train/rm/loss"] + 1e-6, (plain, scaled)
    before, after = _tensors(plain_bt[0] / "model"), _tensors(run / "model")
    assert any(not torch.equal(before[k], after[k]) for k in before)
    _scores(work, run)


def test_two_stages_through_init_from(work):
    folder, _ = work
    first, _, _ = _run(
        work,
        "stage1",
        "{kind: pointwise, attributes: [helpfulness]}",
        data="scored.jsonl",
        mapping="{columns: {prompt: prompt, response: response, scores: {helpfulness: helpfulness}}}",
    )
    # a learning rate too small to move a float32 weight: the saved weights are the initial ones
    second, _, done = _run(
        work,
        "stage2",
        "{kind: bradley_terry, margin: scale}",
        mapping="{preset: pairs, columns: {margin: strength}}",
        init=f", init_from: {first}",
        lr="1.0e-30",
    )
    log = (second / "train.log").read_text()
    assert "tensors taken" in log and "the score head too" in log, log[-2000:]
    source, initial = _tensors(first / "model"), _tensors(second / "model")
    assert set(initial) == set(source)
    for name, tensor in source.items():
        assert torch.equal(initial[name], tensor), name  # every tensor, the score head too, is the first stage's
    base = _tensors(folder / "llama")
    assert any(not torch.equal(base[k], source[k]) for k in base if k in source)  # stage 1 moved away from the base
    _scores(work, second)


def test_sft_weight_keeps_lm_head_in_training_only(work):
    run, status, done = _run(work, "sft", "{kind: bradley_terry, sft_weight: 0.5}")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("train/rm/sft_loss" in r for r in rows), rows[:3]
    _plain_classifier(run)
    scored = _scores(work, run)
    # rmspec score and plain transformers agree on the saved classifier. The tiny tokenizer has no chat
    # template, so the text is rmspec's plain layout (rmspec.data.layout): "User: ...\n\nAssistant: ..." with
    # the tokenizer's own special tokens (its EOS closes the response).
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(run / "model").eval()
    tok = AutoTokenizer.from_pretrained(run / "model")
    assert tok.chat_template is None
    source = {r["id"]: r for r in map(json.loads, (work[0] / "pairs.jsonl").read_text().splitlines())}
    for row in scored[:8]:
        pair = source[row["id"]]
        for side in ("chosen", "rejected"):
            ids = tok(f"User: {pair['prompt']}\n\nAssistant: {pair[side]}")["input_ids"]
            assert ids[-1] == tok.eos_token_id
            with torch.no_grad():
                plain = float(model(input_ids=torch.tensor([ids])).logits[0, 0])
            assert row[f"reward_{side}"] == pytest.approx(plain, abs=1e-5), (row["id"], side)
