"""Issue 21's extra heads end to end: `rmspec run` with approach.length_debias (ODIN) and
approach.ensemble on a tiny BERT for a few steps; the saved model is a plain one-output classifier
(plain transformers scores it as rmspec does); `rmspec score` writes reward_std for the ensemble, the
serve engine's outputs carry the members, and `annotate export --select uncertain` ranks by the
members' disagreement."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from helpers.models import build_model
from helpers.runs import rmspec
from helpers.serving import served_rewards

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [pairs.jsonl]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: 0.25, seed: 0}}
approach: {approach}
training: {{max_steps: 6, learning_rate: 3.0e-3, global_batch_size: 8, max_length: 64, logging_steps: 2, seed: 7}}
hardware: {{device: cpu}}
eval: {{validation: true, benchmarks: []}}
output: {{dir: {out}}}
"""


def _words(rng: random.Random, k: int) -> str:
    return " ".join(f"w{rng.randint(10, 70)}" for _ in range(k))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("heads")
    rng = random.Random(0)
    rows = []
    for i in range(64):  # chosen carries w1 and is longer in most pairs: something for ODIN to undo
        long, short = rng.randint(4, 9), rng.randint(1, 4)
        rows.append(
            {
                "id": f"p{i}",
                "prompt": _words(rng, rng.randint(1, 5)),
                "chosen": "w1 " + _words(rng, long if i % 5 else short),
                "rejected": "w2 " + _words(rng, short if i % 5 else long),
            }
        )
    (folder / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder, build_model("bert", folder / "bert")


def _run(work, name: str, approach: str) -> Path:
    folder, model = work
    spec = folder / f"{name}.yaml"
    run = folder / "runs" / name
    spec.write_text(SPEC.format(name=name, model=model, approach=approach, out=run))
    done = rmspec("run", str(spec), cwd=folder)
    log = (run / "train.log").read_text() if (run / "train.log").exists() else ""
    assert done.returncode == 0, done.stdout + done.stderr + log
    assert json.loads((run / "status.json").read_text())["state"] == "completed"
    return run


def _plain_rewards(model_dir: Path, prompts, responses) -> list[float]:
    """Plain transformers, no rmspec code: the saved folder as any client loads it."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    assert model.config.num_labels == 1
    with torch.no_grad():
        return [float(model(**tok(p, r, return_tensors="pt")).logits[0, 0]) for p, r in zip(prompts, responses)]


def _score_file(folder: Path, run: Path, name: str) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "pairs.jsonl").read_text().splitlines()[:12]]
    src = folder / f"{name}_in.jsonl"
    src.write_text("".join(json.dumps({"prompt": r["prompt"], "response": r["chosen"]}) + "\n" for r in rows))
    out = folder / f"{name}_scored.jsonl"
    done = rmspec("score", str(run), str(src), "--out", str(out), cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_odin_run_saves_the_quality_head(work):
    folder, _ = work
    run = _run(work, "odin", "{kind: bradley_terry, length_debias: {kind: odin}}")
    status = json.loads((run / "status.json").read_text())
    metrics = status["metrics"]
    for key in ("quality_length_corr", "length_head_corr", "sum_accuracy", "accuracy"):
        assert f"eval/rm/{key}" in metrics, sorted(metrics)
    assert -1 <= metrics["eval/rm/length_head_corr"] <= 1
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["id2label"] == {"0": "reward"} and config["rmspec"]["length_debias"]["kind"] == "odin"
    assert not (run / "model" / "ensemble_heads.safetensors").exists()
    # the saved head is row 0 of the last checkpoint's two-row head (quality, not length)
    from safetensors.torch import load_file

    ckpt = sorted((run / "checkpoints").glob("checkpoint-*"))[-1]
    two = load_file(str(ckpt / "model.safetensors"))["classifier.weight"]
    one = load_file(str(run / "model" / "model.safetensors"))["classifier.weight"]
    assert two.shape[0] == 2 and one.shape[0] == 1 and torch.equal(two[:1], one)
    scored = _score_file(folder, run, "odin")
    plain = _plain_rewards(run / "model", [r["prompt"] for r in scored], [r["response"] for r in scored])
    assert max(abs(a - r["reward"]) for a, r in zip(plain, scored)) < 1e-5
    assert "reward_std" not in scored[0]
    served = served_rewards(run, [(r["prompt"], r["response"]) for r in scored])
    assert served == pytest.approx([r["reward"] for r in scored], abs=1e-5)


def test_ensemble_run_members_score_serve_and_select(work):
    folder, _ = work
    run = _run(work, "ens", "{kind: bradley_terry, ensemble: {members: 3, bootstrap: true}}")
    metrics = json.loads((run / "status.json").read_text())["metrics"]
    assert {"eval/rm/member_accuracy", "eval/rm/reward_std", "eval/rm/margin_std"} <= set(metrics)
    model_dir = run / "model"
    config = json.loads((model_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "reward"}
    assert config["rmspec"]["ensemble"] == {"members": 3, "bootstrap": True}
    from safetensors.torch import load_file

    members = load_file(str(model_dir / "ensemble_heads.safetensors"))
    head = load_file(str(model_dir / "model.safetensors"))
    assert members["weight"].shape[0] == 3
    assert torch.allclose(members["weight"].mean(0, keepdim=True), head["classifier.weight"], atol=1e-6)
    assert torch.allclose(members["bias"].mean(0, keepdim=True), head["classifier.bias"], atol=1e-6)

    scored = _score_file(folder, run, "ens")
    plain = _plain_rewards(model_dir, [r["prompt"] for r in scored], [r["response"] for r in scored])
    # plain transformers (the mean head) == rmspec's reward (the members' mean)
    assert max(abs(a - r["reward"]) for a, r in zip(plain, scored)) < 1e-5
    assert all(r["reward_std"] > 0 for r in scored)

    # members by hand: the backbone's pooled features through each member's weights
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    with torch.no_grad():
        enc = tok(scored[0]["prompt"], scored[0]["response"], return_tensors="pt")
        pooled = model.bert(**enc).pooler_output[0]
    by_hand = members["weight"] @ pooled + members["bias"]
    assert abs(float(by_hand.std(correction=0)) - scored[0]["reward_std"]) < 1e-5

    # the engine serve uses: outputs [reward, members...], reductions
    from rmspec.inference.engine import load_scorer
    from rmspec.inference.ensemble import member_std, set_reduce

    engine = load_scorer(run)
    encoded = engine.encode([(scored[0]["prompt"], scored[0]["response"])])
    values = engine.outputs(encoded)[0]
    assert len(values) == 4 and abs(values[0] - plain[0]) < 1e-5
    assert abs(member_std(values) - scored[0]["reward_std"]) < 1e-6
    set_reduce(engine.model, "min")
    assert abs(engine.outputs(encoded)[0][0] - float(by_hand.min())) < 1e-5
    set_reduce(engine.model, "mean_minus_std", 2.0)
    want = float(by_hand.mean() - 2.0 * by_hand.std(correction=0))
    assert abs(engine.outputs(encoded)[0][0] - want) < 1e-5

    # annotate: --select uncertain ranks by the members' disagreement on the margin
    rows = [json.loads(line) for line in (folder / "pairs.jsonl").read_text().splitlines()[:20]]
    src = folder / "pool.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": r["id"], "prompt": r["prompt"], "response_a": r["chosen"], "response_b": r["rejected"]})
            + "\n"
            for r in rows
        )
    )
    out = folder / "export"
    done = rmspec(
        "annotate",
        "export",
        str(src),
        "--out",
        str(out),
        "--select",
        "uncertain",
        "--n",
        "5",
        "--model",
        str(run),
        cwd=folder,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    audit = [json.loads(line) for line in (out / "selection.jsonl").read_text().splitlines()]
    ratio = [a["ensemble_std"] / abs(a["margin"]) for a in audit]
    assert len(ratio) == 5 and ratio == sorted(ratio, reverse=True)
    everyone = [json.loads(line) for line in (folder / "pool.jsonl").read_text().splitlines()]
    assert len(everyone) == 20  # picked from 20: the 5 have the largest std / |margin| (checked against scored_pairs)
    from rmspec.annotate.select import load_engine, scored_pairs

    scores, spread = scored_pairs(
        load_engine(run),
        [{"prompt": r["prompt"], "first": r["response_a"], "second": r["response_b"]} for r in everyone],
    )
    by_hand = sorted(range(20), key=lambda i: -spread[i] / abs(scores[i][0] - scores[i][1]))[:5]
    assert [everyone[i]["id"] for i in by_hand] == [a["id"] for a in audit]


def test_reduce_refused_without_members(work):
    from rmspec.errors import RmspecError
    from rmspec.inference.ensemble import set_reduce

    model = torch.nn.Module()
    set_reduce(model, "mean")  # the default: nothing to do
    with pytest.raises(RmspecError, match="not an ensemble"):
        set_reduce(model, "min")


@pytest.mark.parametrize(
    "approach, message",
    [
        ("{kind: pointwise, attributes: [h], length_debias: {kind: odin}}", "applies to kind: bradley_terry only"),
        ("{kind: process, ensemble: {members: 3}}", "applies to kind: bradley_terry only"),
        ("{kind: generative, ensemble: {members: 3}}", "applies to kind: bradley_terry only"),
        ("{kind: bradley_terry, ensemble: {members: 1}}", "greater than or equal to 2"),
        ("{kind: bradley_terry, ensemble: {members: 3}, length_debias: {kind: odin}}", "together are not supported"),
        ("{kind: bradley_terry, length_debias: {kind: odin}, ties: davidson}", "ties: davidson is not combined"),
    ],
)
def test_validate_refuses_what_cannot_apply(work, approach, message):
    folder, model = work
    spec = folder / "bad.yaml"
    spec.write_text(SPEC.format(name="bad", model=model, approach=approach, out=folder / "runs" / "bad"))
    for command in ("validate", "plan"):
        done = rmspec(command, str(spec), cwd=folder)
        assert done.returncode == 2, done.stdout + done.stderr
        assert message in done.stdout + done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "approach, says",
    [
        ("{kind: bradley_terry, ensemble: {members: 3}}", "ensemble: 3 heads on the shared backbone"),
        (
            "{kind: bradley_terry, length_debias: {kind: odin}}",
            "length_debias (ODIN): a quality head and a length head",
        ),
    ],
)
def test_plan_sizes_the_extra_heads(work, approach, says):
    folder, model = work
    spec = folder / "sized.yaml"
    spec.write_text(SPEC.format(name="sized", model=model, approach=approach, out=folder / "runs" / "sized"))
    done = rmspec("plan", str(spec), cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert says in done.stdout
    plain = SPEC.format(name="sized", model=model, approach="{kind: bradley_terry}", out=folder / "runs" / "sized")
    spec.write_text(plain)
    hidden = json.loads((Path(model) / "config.json").read_text())["hidden_size"]
    extra = {"ensemble": 2, "length": 1}["ensemble" if "ensemble" in approach else "length"] * (hidden + 1)
    assert f"+{extra:,} parameters" in done.stdout
