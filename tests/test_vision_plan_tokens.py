"""`rmspec plan` on a VLM says how many visual tokens each image becomes: the bounds the processor
resizes every image into (model.vision's min/max pixels, else the model folder's saved processor
settings). Checked against the image processor itself (transformers' Qwen2-VL image processor,
its image_grid_thw) on images from 1x1 to 4000x3000: every count lies within the plan's bounds, and
the smallest image reaches the lower one."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from helpers.runs import rmspec
from rmspec.vision.tiny import build_tiny_vlm

SPEC = """version: 1
name: plan-tokens
model:
  name_or_path: vlm
{vision}data:
  source: {{kind: files, paths: [train.jsonl]}}
  mapping: {{preset: pairs}}
approach: {{kind: bradley_terry}}
training: {{max_steps: 1, max_length: 64}}
hardware: {{device: cpu}}
"""
LINE = re.compile(
    r"visual tokens per image: (\d+) to at most (\d+) \(min_pixels ([\d,]+), max_pixels ([\d,]+) from ([^;]+);"
)


def processor_tokens(folder, size, **bounds) -> int:
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained(str(folder), **bounds)
    grid = processor(Image.new("RGB", size, (9, 9, 9)))["image_grid_thw"][0].tolist()
    return grid[0] * grid[1] * grid[2] // processor.merge_size**2


@pytest.mark.parametrize(
    "vision, bounds, source",
    [
        ("", {}, "the model folder's processor settings"),
        (
            "  vision: {min_pixels: 12544, max_pixels: 50176}\n",
            {"min_pixels": 12544, "max_pixels": 50176},
            "model.vision",
        ),
    ],
)
def test_plan_bounds_the_visual_tokens_per_image(tmp_path, vision, bounds, source):
    folder = build_tiny_vlm(tmp_path / "vlm")
    (tmp_path / "train.jsonl").write_text('{"prompt": "q", "chosen": "a", "rejected": "b"}\n')
    (tmp_path / "spec.yaml").write_text(SPEC.format(vision=vision))
    plan = rmspec("plan", "spec.yaml", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    found = LINE.search(" ".join(plan.stdout.split()))
    assert found, plan.stdout
    low, high = int(found[1]), int(found[2])
    assert found[5] == source
    if bounds:
        assert (int(found[3].replace(",", "")), int(found[4].replace(",", ""))) == (12544, 50176)
    counts = [processor_tokens(folder, size, **bounds) for size in [(1, 1), (64, 64), (300, 200), (4000, 3000)]]
    assert all(low <= n <= high for n in counts), (low, high, counts)
    assert counts[0] == low
