"""A vision-language reward model in `rmspec score` and `rmspec eval` (issue 37 V2), on the tiny
offline Qwen2-VL (rmspec.vision.tiny): rewards equal a plain transformers forward of the same
checkpoint (one conversation at a time, the processor's own chat template and image handling)
within 1e-5; rows with bad images go to the rejects file with the reason; benchmark rows with images
score as the same forward."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.runs import rmspec

PROMPT = "What colour is the picture?"


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    need("torch")
    from rmspec.vision.tiny import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"), seed=3)


def png(colour, size=(40, 40)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def plain_reward(model_dir: Path, user_parts: list[dict], images: list[bytes], response: str) -> float:
    """A few lines of plain transformers: the checkpoint's class and processor, one conversation."""
    import torch
    from PIL import Image
    from transformers import AutoConfig, AutoProcessor

    from rmspec.vision.models import reward_class
    from rmspec.vision.tiny import processor_class

    processor_class()  # Qwen2-VL's processor without torchvision, registered for AutoProcessor
    model = reward_class(AutoConfig.from_pretrained(model_dir)).from_pretrained(model_dir).eval()
    processor = AutoProcessor.from_pretrained(model_dir)
    messages = [{"role": "user", "content": user_parts}, {"role": "assistant", "content": response}]
    text = processor.apply_chat_template(messages, tokenize=False)
    pictures = [Image.open(io.BytesIO(b)).convert("RGB") for b in images]
    inputs = processor(text=[text], images=pictures or None, return_tensors="pt")
    with torch.no_grad():
        return float(model(**inputs).logits[0, 0])


def test_score_reads_images_and_rejects_bad_ones(tiny_vlm, tmp_path):
    red, blue = png((255, 0, 0)), png((0, 0, 255), (56, 28))
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "red.png").write_bytes(red)
    blue_uri = "data:image/png;base64," + base64.b64encode(blue).decode()
    parts = [{"type": "image"}, {"type": "text", "text": PROMPT}]
    rows = [
        {"prompt": [{"role": "user", "content": parts}], "response": "Red.", "images": ["pics/red.png"]},
        {"prompt": "<image>" + PROMPT, "response": "Blue, I think.", "images": [blue_uri]},
        {"prompt": [{"role": "user", "content": parts}], "response": "Red.", "images": ["pics/gone.png"]},
        {"prompt": "<image>" + PROMPT, "response": "Blue.", "images": ["data:image/png;base64,bm90IGEgcGljdHVyZQ=="]},
        {"prompt": "<image>" + PROMPT, "response": "Two?", "images": ["pics/red.png", blue_uri]},
        {"prompt": "No picture here.", "response": "Fine.", "images": []},
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "scored.jsonl"
    result = rmspec("score", str(tiny_vlm), str(source), "--out", str(out), "--json", "--batch-size", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["response"] for r in scored] == ["Red.", "Blue, I think.", "Fine."]
    expected = [
        plain_reward(tiny_vlm, parts, [red], "Red."),
        plain_reward(tiny_vlm, parts, [blue], "Blue, I think."),
        plain_reward(tiny_vlm, [{"type": "text", "text": "No picture here."}], [], "Fine."),
    ]
    assert [r["reward"] for r in scored] == pytest.approx(expected, abs=1e-5)
    assert len({round(e, 6) for e in expected}) == 3  # the rows differ: the comparison can fail
    rejects = [json.loads(line) for line in out.with_name("scored.rejects.jsonl").read_text().splitlines()]
    assert [(r["row"], r["reason_kind"]) for r in rejects] == [
        (2, "image_missing"),
        (3, "image_undecodable"),
        (4, "image_count_mismatch"),
    ]
    assert "images[0]" in rejects[0]["reason"] and "gone.png" in rejects[0]["reason"]


def test_vl_rewardbench_rows_equal_a_plain_forward(tiny_vlm, tmp_path):
    from rmspec.evaluate import registry
    from rmspec.inference import scorers

    red, green = png((255, 0, 0)), png((0, 255, 0))
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(red)
    (tmp_path / "images" / "b.png").write_bytes(green)
    items = [
        {"id": "RLAIF-V-1", "image_path": "images/a.png", "query": "Colour?", "response": ["Red.", "Green."]},
        {"id": "wildvision_2", "image_path": "images/b.png", "query": "Colour?", "response": ["Red.", "Green."]},
    ]
    items[0]["human_ranking"], items[1]["human_ranking"] = [0, 1], [1, 0]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    kind = registry.get("vl_rewardbench")
    engine = scorers.load(tiny_vlm)
    assert engine.kind == "vision_reward"
    rows = kind.scored_rows(engine, kind.load(str(path)))
    parts = [{"type": "image"}, {"type": "text", "text": "Colour?"}]
    assert rows[0]["score_chosen"] == pytest.approx(plain_reward(tiny_vlm, parts, [red], "Red."), abs=1e-5)
    assert rows[0]["score_rejected"] == pytest.approx(plain_reward(tiny_vlm, parts, [red], "Green."), abs=1e-5)
    assert rows[1]["score_chosen"] == pytest.approx(plain_reward(tiny_vlm, parts, [green], "Green."), abs=1e-5)
    assert rows[1]["score_rejected"] == pytest.approx(plain_reward(tiny_vlm, parts, [green], "Red."), abs=1e-5)
