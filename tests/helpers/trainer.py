"""Specs and learnable pair rows for the trainer tests (tokenized, as a datasets.Dataset)."""

from __future__ import annotations

import random
from pathlib import Path

from rmspec.spec import load_spec

SPEC = """
version: 1
name: tiny
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [rows.jsonl]}}
  mapping: {mapping}
  split: {{validation_fraction: 0.2}}
approach: {approach}
training: {training}
hardware: {{device: cpu}}
"""


def write_spec(
    tmp_path: Path, model: Path, *, approach: str, mapping: str = "{preset: pairs}", training: str
) -> object:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(model=model, approach=approach, mapping=mapping, training=training))
    return load_spec(path)


def pair_rows(tok, n: int, seed: int):
    """Learnable pairs: the chosen response carries w1, the rejected w2, lengths vary."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        prompt = " ".join(f"w{rng.randint(10, 70)}" for _ in range(rng.randint(1, 12)))
        good = " ".join(["w1"] + [f"w{rng.randint(10, 70)}" for _ in range(rng.randint(0, 6))])
        bad = " ".join(["w2"] + [f"w{rng.randint(10, 70)}" for _ in range(rng.randint(0, 6))])
        rows.append(
            {
                "id": str(i),
                "prompt": prompt,
                "chosen": good,
                "rejected": bad,
                "margin": 0.0,
                "chosen_input_ids": tok(prompt + " " + good)["input_ids"],
                "rejected_input_ids": tok(prompt + " " + bad)["input_ids"],
            }
        )
    return rows


def as_dataset(rows):
    from datasets import Dataset

    return Dataset.from_list(rows)


def train_logged(tmp_path: Path, model_dir: Path, *, approach: str, training: str, make_rows) -> tuple[object, list]:
    """A run of rmspec's trainer in this process on ``make_rows(tokenizer)`` (seed 1, CPU, no validation): the
    trainer after training and the loss it logged at each step (``train/rm/loss``)."""
    import json

    from rmspec.train.arguments import build_training_arguments
    from rmspec.train.callbacks import MetricsJsonl
    from rmspec.train.factory import build_trainer
    from rmspec.train.modeling import load_model

    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = write_spec(tmp_path, model_dir, approach=approach, training=training).spec
    loaded = load_model(str(model_dir), spec.approach, seed=1)
    args = build_training_arguments(spec, None, tmp_path / "checkpoints", has_validation=False, use_cpu=True)
    metrics = tmp_path / "metrics.jsonl"
    rows = as_dataset(make_rows(loaded.tokenizer))
    trainer = build_trainer(spec, loaded.model, loaded.tokenizer, args, rows, None, [MetricsJsonl(metrics)])
    trainer.train()
    lines = metrics.read_text().splitlines()
    return trainer, [json.loads(line)["train/rm/loss"] for line in lines if "train/rm/loss" in line]
