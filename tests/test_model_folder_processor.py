"""RUN/model of a vision-language reward model is a Hugging Face folder for images too (issue 47 item 11).

Before: the run saved `processor_class: Qwen2VLProcessor` (rmspec's image-only subclass under the family's
name), and `AutoProcessor.from_pretrained(RUN/model)` asked for a video processor config (which
transformers builds only with torchvision); the base model here has a remote-code-style image-only
processor (rmspec.vision.tiny's, registered in-process), as the issue found. The model card's snippet did
not build the processor.

Now, in a fresh interpreter that never imports rmspec (and has no torchvision):
- `AutoProcessor.from_pretrained(RUN/model, trust_remote_code=True)` loads the processor training used
  (the folder's processing_image_text.py), with the folder's image settings;
- the model card's Python block, run as written (PATH and PICTURE filled in), builds the model and the
  processor and scores one picture: its reward equals `rmspec score RUN` on the same row.

One short real run (2 steps of a tiny Qwen2-VL, rmspec.vision.tiny) for the module.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.runs import rmspec

need("torch")

SPEC = """version: 1
name: folder
model: {name_or_path: tiny-vlm}
data:
  source: {kind: files, paths: [train.jsonl]}
  mapping: {preset: pairs}
  split: {validation_source: {kind: files, paths: [heldout.jsonl]}}
approach: {kind: bradley_terry}
training: {max_steps: 2, learning_rate: 3.0e-3, global_batch_size: 8, max_length: 128, logging_steps: 1, seed: 0}
eval: {validation: true, benchmarks: []}
output: {report: []}
hardware: {device: cpu}
"""


def fresh(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter, outside the repository (nothing of rmspec on its path but the
    installed package, which it must not import)."""
    guard = "\nimport sys\nassert not [m for m in sys.modules if m.split('.')[0] == 'rmspec'], 'rmspec was imported'\n"
    return subprocess.run(
        [sys.executable, "-c", code + guard],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(cwd), "OMP_NUM_THREADS": "1"},
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from rmspec.vision.demo import write_colour_pairs
    from rmspec.vision.tiny import build_tiny_generation_vlm

    folder = tmp_path_factory.mktemp("folder-run")
    write_colour_pairs(folder, "train", 16, seed=1)
    write_colour_pairs(folder, "heldout", 4, seed=2)
    build_tiny_generation_vlm(folder / "tiny-vlm")  # its processor: the image-only ImageTextProcessor
    base = json.loads((folder / "tiny-vlm" / "processor_config.json").read_text())
    assert base["processor_class"] == "ImageTextProcessor"  # not a class plain transformers has
    (folder / "folder.yaml").write_text(SPEC)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")  # 2 threads on 2 shared cores train many times slower
        done = rmspec("run", "folder.yaml", cwd=folder, timeout=900)
    root = folder / "runs" / "folder"
    log = (root / "train.log").read_text() if (root / "train.log").exists() else ""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-3000:]
    return root


def test_autoprocessor_loads_run_model_without_rmspec(run, tmp_path):
    saved = run / "model"
    code = (
        "from transformers import AutoProcessor\n"
        f"processor = AutoProcessor.from_pretrained({str(saved)!r}, trust_remote_code=True)\n"
        "print(type(processor).__name__, type(processor.image_processor).__name__, type(processor.tokenizer).__name__)\n"
        "print(processor.image_processor.size['shortest_edge'], processor.image_processor.size['longest_edge'])\n"
        "print(getattr(processor, 'video_processor', None))\n"
    )
    done = fresh(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    names, size, video = done.stdout.strip().splitlines()[-3:]
    assert names.split()[0] == "ImageTextProcessor" and names.split()[1].startswith("Qwen2VLImageProcessor")
    from rmspec.vision.tiny import MAX_PIXELS, MIN_PIXELS

    assert size.split() == [str(MIN_PIXELS), str(MAX_PIXELS)]  # the resolution training used
    assert video == "None"
    config = json.loads((saved / "processor_config.json").read_text())
    assert config["processor_class"] == "Qwen2VLProcessor"  # transformers' own class where torchvision is installed


def card_python(saved: Path) -> str:
    card = (saved / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", card, flags=re.S)
    assert len(blocks) == 1, card
    return blocks[0]


def test_the_model_cards_snippet_scores_a_picture_as_rmspec_score_does(run, tmp_path):
    saved = run / "model"
    picture = run.parent.parent / "heldout" / "0.png"
    snippet = card_python(saved)
    assert "AutoProcessor.from_pretrained" in snippet and "PICTURE" in snippet
    done = fresh(snippet.replace("PATH", str(saved)).replace("PICTURE", str(picture)), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    plain = float(done.stdout.strip().splitlines()[-1])

    # the same row through `rmspec score`: the card's conversation, the same picture
    row = {
        "prompt": [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in the picture?"}]}
        ],
        "response": "A red square.",
        "images": [str(picture)],
    }
    rows = tmp_path / "row.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    out = tmp_path / "scored.jsonl"
    scored = rmspec("score", str(run), str(rows), "--out", str(out), cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr[-3000:]
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["reward"] == pytest.approx(plain, abs=1e-5)
    assert abs(plain) > 1e-4  # a reward, not a zero head
