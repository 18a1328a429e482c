"""The multimodal demo's data: one-colour pictures, and answers that differ only in the colour named.

A tiny VLM trained from scratch learns this task (REFERENCE 16: one-colour pictures reach 1.0
held-out in about 100 steps, while mixed shapes tasks stay at chance), and a text-only model
cannot: the question is the same for every row and the chosen and rejected answers read alike, so
only the picture says which is right. ``blank=True`` writes the same rows with grey pictures: a
model that learned from the pictures scores that copy at chance.
"""

from __future__ import annotations

import json
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
