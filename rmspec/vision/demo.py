"""The multimodal demo's data: one-colour pictures, and answers that differ only in the colour named.

A tiny VLM trained from scratch learns this task (REFERENCE 16: one-colour pictures reach 1.0
held-out in about 100 steps, while mixed shapes tasks stay at chance), and a text-only model
cannot: the question is the same for every row and the chosen and rejected answers read alike, so
only the picture says which is right. ``blank=True`` writes the same rows with grey pictures: a
model that learned from the pictures scores that copy at chance.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from PIL import Image

COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 180, 40),
    "blue": (30, 60, 220),
    "yellow": (235, 220, 40),
}
QUESTION = "What colour is the picture?"
BLANK = (128, 128, 128)


def answer(colour: str) -> str:
    return f"The picture is {colour}."


def write_colour_pairs(
    folder: str | Path, name: str, n: int, seed: int = 0, size: int = 64, blank: bool = False
) -> Path:
    """``folder/name.jsonl`` with ``n`` pairs and their pictures under ``folder/name/``; returns the file."""
    folder = Path(folder)
    images = folder / name
    images.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    names = sorted(COLOURS)
    lines = []
    for i in range(n):
        colour = names[i % len(names)] if i < len(names) else rng.choice(names)
        wrong = rng.choice([c for c in names if c != colour])
        # A little noise in the shade, so no two pictures are the same file.
        shade = tuple(max(0, min(255, v + rng.randint(-20, 20))) for v in COLOURS[colour])
        picture = Image.new("RGB", (size, size), BLANK if blank else shade)
        picture.save(images / f"{i}.png")
        lines.append(
            {
                "id": f"{name}-{i}",
                "prompt": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}],
                "chosen": answer(colour),
                "rejected": answer(wrong),
                "images": [f"{name}/{i}.png"],
                "colour": colour,
            }
        )
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


SPEC = """\
# The multimodal demo: a tiny Qwen2-VL (built from a config, offline) learns which answer names the
# picture's colour. Held-out accuracy near 1.0; the benchmark {data}blank.jsonl, the same rows with
# grey pictures, stays at chance: the signal is visual. Run it with one thread on a shared CPU
# (OMP_NUM_THREADS=1 rmspec run THIS_FILE: two threads trained many times slower), then
# `rmspec report runs/{name}`.
version: 1
name: {name}
model:
  name_or_path: {data}tiny-vlm
data:
  source: {{kind: files, paths: [{data}train.jsonl]}}
  mapping: {{preset: pairs}}
  split: {{validation_source: {{kind: files, paths: [{data}heldout.jsonl]}}}}
approach: {{kind: bradley_terry}}
training:
  max_steps: {steps}
  learning_rate: 3.0e-3
  global_batch_size: {batch}
  max_length: 128
  logging_steps: 20
  seed: 0
eval:
  benchmarks: [{{kind: pairs, path: {data}blank.jsonl}}]
hardware: {{device: cpu}}
"""


def write_demo(
    folder: str | Path,
    train: int = 240,
    heldout: int = 80,
    steps: int = 100,
    batch: int = 16,
    spec: str | Path | None = None,
    name: str = "multimodal-demo",
) -> Path:
    """The demo's folder: train / heldout / blank pairs, the tiny VLM, and the spec (returned):
    ``folder/spec.yaml``, or ``spec`` with its paths written relative to its own folder."""
    from rmspec.vision.tiny import build_tiny_vlm

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_colour_pairs(folder, "train", train, seed=1)
    write_colour_pairs(folder, "heldout", heldout, seed=2)
    write_colour_pairs(folder, "blank", heldout, seed=2, blank=True)
    build_tiny_vlm(folder / "tiny-vlm")
    target = Path(spec) if spec is not None else folder / "spec.yaml"
    data = Path(os.path.relpath(folder.resolve(), target.resolve().parent)).as_posix()
    prefix = "" if data == "." else f"{data}/"
    target.write_text(SPEC.format(steps=steps, batch=batch, name=name, data=prefix), encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> None:
    """`python -m rmspec.vision.demo DIR [--spec FILE] [--name NAME] [--steps N]` (what
    `rmspec init --example multimodal` runs: building the model needs torch, init stays light)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rmspec.vision.demo", description=main.__doc__)
    parser.add_argument("folder", nargs="?", default="multimodal-demo", help="where the data and the tiny model go")
    parser.add_argument("--spec", help="the spec file to write (default: FOLDER/spec.yaml)")
    parser.add_argument("--name", default="multimodal-demo", help="the run's name")
    parser.add_argument("--steps", type=int, default=100, help="training steps")
    args = parser.parse_args(argv)
    spec = write_demo(args.folder, steps=args.steps, spec=args.spec, name=args.name)
    print(f"wrote {spec}; next: OMP_NUM_THREADS=1 rmspec run {spec}")


if __name__ == "__main__":
    main()
