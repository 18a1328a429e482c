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
