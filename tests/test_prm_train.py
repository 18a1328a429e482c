"""Process reward model training and scoring: the loss by hand and against transformers' own
token-classification loss, last-step training, a few real optimizer steps, save and reload giving
the same step scores, and a TRL-style PRM folder scored with TRL's layout (checked by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rmspec.train.process import IGNORE, StepCollator, last_step_only, step_loss

PRM = SimpleNamespace(kind="process", step_separator=" w79", train_on="all_steps", threshold=0.5, tune_threshold=False)


def test_loss_by_hand():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 2)
    labels = torch.tensor([[IGNORE, 1, IGNORE, 0], [IGNORE, IGNORE, 1, IGNORE]])
    # -log softmax(logits)[label] averaged over the three labelled tokens
    terms = []
    for b, t in [(0, 1), (0, 3), (1, 2)]:
        z = logits[b, t]
        y = int(labels[b, t])
        terms.append(-(z[y] - torch.logsumexp(z, 0)))
    assert step_loss(logits, labels).item() == pytest.approx(torch.stack(terms).mean().item(), abs=1e-6)


def test_last_step_only_keeps_each_rows_last_label():
    labels = torch.tensor([[IGNORE, 1, IGNORE, 0, IGNORE], [1, IGNORE, 1, IGNORE, IGNORE], [IGNORE] * 5])
    assert last_step_only(labels).tolist() == [
        [IGNORE, IGNORE, IGNORE, 0, IGNORE],
        [IGNORE, IGNORE, 1, IGNORE, IGNORE],
        [IGNORE] * 5,
    ]


def test_collator_pads_labels_with_ignore():
    batch = StepCollator(pad_token_id=0)(
        [{"input_ids": [5, 6, 7], "labels": [IGNORE, IGNORE, 1]}, {"input_ids": [5], "labels": [0]}]
    )
    assert batch["labels"].tolist() == [[IGNORE, IGNORE, 1], [0, IGNORE, IGNORE]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


@pytest.fixture(scope="module")
def llama_prm(tmp_path_factory):
    from helpers.models import build_model
    from rmspec.train.modeling import load_model

    folder = build_model("llama", tmp_path_factory.mktemp("prm") / "llama")
    loaded = load_model(str(folder), PRM, seed=3)
    return loaded


def test_model_is_a_two_label_token_classifier(llama_prm):
    model = llama_prm.model
    assert type(model).__name__ == "LlamaForTokenClassification"
    assert model.config.num_labels == 2 and model.config.id2label == {0: "wrong", 1: "correct"}
    assert llama_prm.head_initialized


def test_trainer_loss_matches_transformers_token_classification_loss(llama_prm):
    from rmspec.train.process import ProcessTrainer

    model = llama_prm.model.eval()
    ids = torch.tensor([[3, 4, 5, 6, 7, 8], [3, 4, 9, 10, 0, 0]])
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    labels = torch.tensor([[IGNORE, IGNORE, 1, IGNORE, IGNORE, 0], [IGNORE, 1, IGNORE, 0, IGNORE, IGNORE]])
    trainer = ProcessTrainer.__new__(ProcessTrainer)  # compute_loss only needs train_on
    trainer.train_on = "all_steps"
    ours = trainer.compute_loss(model, {"input_ids": ids, "attention_mask": mask, "labels": labels})
    reference = model(input_ids=ids, attention_mask=mask, labels=labels).loss  # transformers' own CE
    assert ours.item() == pytest.approx(reference.item(), rel=1e-5)


def prm_rows(tok, n=24):
    from rmspec.data.layout import Layout
    from rmspec.data.steps import StepEncoder

    enc = StepEncoder(Layout(tok, "plain"), " w79")
    rows = []
    for i in range(n):
        wrong = i % 2
        steps = ["w10 w11", "w12 w40" if wrong else "w12 w13", "w14"]
        labels = [1, 0, 0] if wrong else [1, 1, 1]
        seq = enc.encode([[{"role": "user", "content": f"w{i % 5}"}]], [steps], [labels], 64)[0]
        rows.append({"input_ids": seq.ids, "labels": seq.labels, "steps": steps, "prompt": f"w{i % 5}"})
    return rows


@pytest.mark.slow
def test_a_few_steps_learn_and_save_reload_gives_the_same_step_scores(llama_prm, tmp_path):
    import datasets
    from transformers import TrainingArguments

    from rmspec.inference.engine import RewardEngine
    from rmspec.inference.process import StepEngine
    from rmspec.train.process import ProcessTrainer, process_metrics

    tok, model = llama_prm.tokenizer, llama_prm.model
    rows = prm_rows(tok)
    ds = datasets.Dataset.from_list([{k: r[k] for k in ("input_ids", "labels")} for r in rows])
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        learning_rate=5e-3,
        max_steps=25,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=5,
        seed=0,
    )
    trainer = ProcessTrainer(
        model=model,
        args=args,
        train_dataset=ds,
        eval_dataset=ds,
        data_collator=StepCollator(tok.pad_token_id),
        processing_class=tok,
        compute_metrics=process_metrics(0.5),
    )
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    metrics = trainer.evaluate()
    assert metrics["eval_loss"] < before
    assert metrics["eval_step_accuracy"] > 0.9 and metrics["eval_auroc"] > 0.9
    assert metrics["eval_first_error_accuracy"] > 0.9

    model.config.update({"rmspec": {"step_separator": " w79", "threshold": 0.5, "chat_template": "plain"}})
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    items = [([{"role": "user", "content": r["prompt"]}], r["steps"]) for r in rows[:6]]
    in_memory = StepEngine.from_parts(model.eval(), tok).step_probabilities(items)
    engine = RewardEngine.load(tmp_path / "model")  # any token classifier folder -> per-step scores
    assert isinstance(engine, StepEngine) and engine.layout_name == "plain"
    reloaded = engine.step_probabilities(items)
    for a, b in zip(in_memory, reloaded):
        assert a == pytest.approx(b, abs=1e-6)
    # the predicted first errors follow the rows' labels
    scored = engine.score_steps(items)
    assert [s.prediction for s in scored] == [-1, 1, -1, 1, -1, 1]


def test_trl_saved_prm_is_scored_with_trls_layout(tmp_path):
    """A folder as TRL's PRMTrainer leaves it (AutoModelForTokenClassification, 2 labels, no rmspec
    config): rmspec encodes [bos] + prompt + (step + separator)... as TRL's tokenize_row does and
    reads softmax(logits)[..., 1] at each separator token, as plain transformers computes it."""
    from transformers import AutoModelForTokenClassification

    from helpers.models import build_tokenizer, tiny_llama_config
    from rmspec.inference.process import StepEngine

    folder = tmp_path / "trl"
    tok = build_tokenizer(folder, unk=True)
    config = tiny_llama_config(vocab_size=len(tok), num_labels=2, pad_token_id=0)
    torch.manual_seed(0)
    AutoModelForTokenClassification.from_config(config).save_pretrained(folder)
    engine = StepEngine.load(folder, separator=" w79")
    assert engine.layout_name == "trl"
    prompt, steps = "w1 w2", ["w3 w4", "w5"]
    seq = engine.encode([(prompt, steps)])[0]
    enc = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    expected = enc("w1 w2") + enc("w3 w4") + enc(" w79") + enc("w5") + enc(" w79")  # no BOS in this tokenizer
    assert seq.ids == expected and seq.ends == [len(enc("w1 w2")) + 2, len(expected) - 1]
    model = AutoModelForTokenClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        probs = model(input_ids=torch.tensor([expected])).logits.softmax(-1)[0, :, 1]
    assert engine.step_probabilities([(prompt, steps)])[0] == pytest.approx(
        [probs[e].item() for e in seq.ends], abs=1e-6
    )


def test_eval_cli_scores_a_prm_folder_on_a_local_processbench_file(tmp_path, cli):
    from transformers import AutoModelForTokenClassification

    from helpers.models import build_tokenizer, tiny_llama_config

    folder = tmp_path / "m"
    tok = build_tokenizer(folder, unk=True)
    config = tiny_llama_config(vocab_size=len(tok), num_hidden_layers=1, num_labels=2, pad_token_id=0)
    AutoModelForTokenClassification.from_config(config).save_pretrained(folder)
    (folder / "config.json").write_text(
        json.dumps(
            {**json.loads((folder / "config.json").read_text()), "rmspec": {"step_separator": " w79", "threshold": 0.5}}
        )
    )
    rows = [{"id": f"gsm8k-{i}", "problem": "w1", "steps": ["w2", "w3"], "label": [-1, 0, 1][i % 3]} for i in range(6)]
    bench = tmp_path / "pb.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = cli("eval", str(folder), "--benchmark", f"processbench={bench}", "--out", str(tmp_path / "ev"), "--json")
    assert result.code == 0, result.out + result.err
    per = [json.loads(x) for x in (tmp_path / "ev" / "processbench.jsonl").read_text().splitlines()]
    assert [r["id"] for r in per] == [r["id"] for r in rows]
    assert all(
        len(r["step_scores"]) == 2
        and r["prediction"] == next((i for i, s in enumerate(r["step_scores"]) if s < 0.5), -1)
        for r in per
    )
    from rmspec.evaluate.scoring_rules import score_rows

    saved = json.loads((tmp_path / "ev" / "results.json").read_text())["benchmarks"]["processbench"]
    assert saved["overall"] == pytest.approx(score_rows("processbench", per).overall, nan_ok=True)


PRM_SPEC = """version: 1
name: prm
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [steps.jsonl]}}
  mapping: {{preset: stepwise}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: process, step_separator: " w79", tune_threshold: true}}
training: {{max_steps: 30, learning_rate: 1.0e-2, global_batch_size: 16, max_length: 64, logging_steps: 10}}
hardware: {{device: cpu}}
eval: {{benchmarks: [{{kind: processbench, path: pb.jsonl}}]}}
output: {{dir: {out}}}
"""


@pytest.mark.slow
def test_rmspec_run_trains_evaluates_and_reports_a_prm(tmp_path):
    """The whole path: stepwise data -> tiny Llama PRM -> validation step metrics, ProcessBench on
    a local file, the tuned threshold reported beside the headline, report.html."""
    import random

    from helpers.models import build_model
    from helpers.runs import rmspec

    rng = random.Random(0)
    good, bad = "w12 w13", "w12 w40"  # a wrong step carries w40

    def solution():
        wrong = rng.randrange(3) if rng.random() < 0.5 else -1
        return [bad if k == wrong else good for k in range(3)], wrong

    with (tmp_path / "steps.jsonl").open("w") as handle:
        for _ in range(160):
            steps, wrong = solution()
            handle.write(
                json.dumps(
                    {"prompt": f"w{rng.randint(1, 5)}", "completions": steps, "labels": [k != wrong for k in range(3)]}
                )
                + "\n"
            )
    with (tmp_path / "pb.jsonl").open("w") as handle:
        for i in range(40):
            steps, wrong = solution()
            handle.write(json.dumps({"id": f"toy-{i}", "problem": "w1", "steps": steps, "label": wrong}) + "\n")
    model = build_model("llama", tmp_path / "llama")
    spec = tmp_path / "prm.yaml"
    spec.write_text(PRM_SPEC.format(model=model, out=tmp_path / "runs" / "prm"))
    done = rmspec("run", str(spec), cwd=tmp_path)
    run = tmp_path / "runs" / "prm"
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed"
    assert {"eval/rm/step_accuracy", "eval/rm/auroc", "eval/rm/first_error_accuracy"} <= set(status["metrics"])
    results = json.loads((run / "results.json").read_text())
    bench = results["benchmarks"]["processbench"]
    assert bench["overall"] > 0.9 and bench["details"]["threshold"] == 0.5
    assert results["threshold"]["value"] == 0.5 and results["threshold"]["tuned"]["used_for_headline"] is False
    assert bench["details"]["tuned"]["note"].startswith("tuned threshold")
    rows = [json.loads(x) for x in Path(bench["per_example_path"]).read_text().splitlines()]
    from rmspec.evaluate.scoring_rules import score_rows

    assert score_rows("processbench", rows).overall == pytest.approx(bench["overall"])
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForTokenClassification"] and config["rmspec"]["step_separator"] == " w79"
    html = (run / "report.html").read_text()
    assert "first wrong step: gold (rows) x predicted (columns)" in html and "step scores" in html
