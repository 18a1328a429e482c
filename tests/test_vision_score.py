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
    parts = [{"type": "text", "text": "Colour?"}, {"type": "image"}]  # as the official inference_hf.py sends them
    assert rows[0]["score_chosen"] == pytest.approx(plain_reward(tiny_vlm, parts, [red], "Red."), abs=1e-5)
    assert rows[0]["score_rejected"] == pytest.approx(plain_reward(tiny_vlm, parts, [red], "Green."), abs=1e-5)
    assert rows[1]["score_chosen"] == pytest.approx(plain_reward(tiny_vlm, parts, [green], "Green."), abs=1e-5)
    assert rows[1]["score_rejected"] == pytest.approx(plain_reward(tiny_vlm, parts, [green], "Red."), abs=1e-5)


def served(model_dir: Path, limits=None):
    from fastapi.testclient import TestClient

    from rmspec.inference.engine import load_scorer
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    return TestClient(create_app(Service(load_scorer(model_dir), model_name="m", normalize=False, limits=limits)))


def uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def test_serve_reads_image_url_parts_as_score_does(tiny_vlm, tmp_path):
    """vLLM's /pooling and /classify with OpenAI image_url parts: the reward equals `rmspec score` of the
    same conversation and a plain transformers forward within 1e-5."""
    need("fastapi")
    from rmspec.inference import scorers
    from rmspec.score.runner import score_file

    red, blue = png((255, 0, 0)), png((0, 0, 255), (28, 56))
    conversations = [
        ([red], "Red."),
        ([red, blue], "The first is red, the second blue."),
    ]
    rows, served_rewards = [], []
    with served(tiny_vlm) as client:
        for images, reply in conversations:
            parts = [{"type": "image_url", "image_url": {"url": uri(b)}} for b in images]
            parts.append({"type": "text", "text": PROMPT})
            messages = [{"role": "user", "content": parts}, {"role": "assistant", "content": reply}]
            answer = client.post("/pooling", json={"messages": messages, "use_activation": False})
            assert answer.status_code == 200, answer.text
            served_rewards.append(answer.json()["data"][0]["data"][0])
            classify = client.post("/classify", json={"messages": messages, "use_activation": False})
            assert classify.status_code == 200, classify.text
            assert classify.json()["data"][0]["probs"][0] == pytest.approx(served_rewards[-1], abs=1e-6)
            rows.append(
                {"prompt": "<image>" * len(images) + PROMPT, "response": reply, "images": [uri(b) for b in images]}
            )
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    score_file(scorers.load(tiny_vlm), source, tmp_path / "out.jsonl", target=str(tiny_vlm))
    scored = [json.loads(line)["reward"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    plain = [
        plain_reward(tiny_vlm, [{"type": "image"}] * len(images) + [{"type": "text", "text": PROMPT}], images, reply)
        for images, reply in conversations
    ]
    assert served_rewards == pytest.approx(plain, abs=1e-5)
    assert scored == pytest.approx(plain, abs=1e-5)
    assert abs(plain[0] - plain[1]) > 1e-4


def test_serve_refuses_bad_images_naming_the_item(tiny_vlm):
    need("fastapi")
    from rmspec.serve.service import Limits

    def ask(client, image_part):
        parts = [{"type": "text", "text": PROMPT}, image_part]
        messages = [{"role": "user", "content": parts}, {"role": "assistant", "content": "Red."}]
        return client.post("/pooling", json={"messages": messages})

    with served(tiny_vlm, Limits(max_image_bytes=2000)) as client:
        broken = ask(client, {"type": "image_url", "image_url": {"url": "data:image/png;base64,bm90IGFuIGltYWdl"}})
        assert broken.status_code == 400 and "messages.0.content.1" in broken.text and "undecodable" in broken.text
        url = ask(client, {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})
        assert url.status_code == 400 and "--allow-image-urls" in url.text
        path = ask(client, {"type": "image_url", "image_url": {"url": "/etc/hostname"}})
        assert path.status_code == 400 and "messages.0.content.1" in path.text
        big = ask(client, {"type": "image_url", "image_url": {"url": uri(png((9, 9, 9), (400, 400)) + b"\0" * 3000)}})
        assert big.status_code == 413 and "--max-image-mb" in big.text
        text = client.post("/pooling", json={"input": "Red."})
        assert text.status_code == 400 and "messages" in text.text


def test_score_pairs_with_images(tiny_vlm, tmp_path):
    """A pair's two responses share the row's images: both rewards equal the plain forward."""
    from rmspec.inference import scorers
    from rmspec.score.runner import score_file

    green = png((0, 200, 0))
    (tmp_path / "g.png").write_bytes(green)
    parts = [{"type": "text", "text": PROMPT}, {"type": "image"}]
    row = {"prompt": [{"role": "user", "content": parts}], "chosen": "Green.", "rejected": "Purple.", "images": "g.png"}
    (tmp_path / "pairs.jsonl").write_text(json.dumps(row) + "\n")
    score_file(scorers.load(tiny_vlm), tmp_path / "pairs.jsonl", tmp_path / "out.jsonl", target=str(tiny_vlm))
    [scored] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    chosen = plain_reward(tiny_vlm, parts, [green], "Green.")
    rejected = plain_reward(tiny_vlm, parts, [green], "Purple.")
    assert scored["reward_chosen"] == pytest.approx(chosen, abs=1e-5)
    assert scored["reward_rejected"] == pytest.approx(rejected, abs=1e-5)
    assert scored["margin"] == pytest.approx(chosen - rejected, abs=1e-5)


def test_layout_ids_survive_a_padded_processor_call(tiny_vlm):
    """A batch the processor pads (rmspec.vision.collate.VisionEncoder, as training and scoring call
    it) leaves padding switched on in the fast tokenizer's Rust backend until the next tokenizer
    call; the data layout encodes through that backend, so the next conversation it encoded came back
    padded with <|endoftext|> to the batch's longest piece (and a reward read at a padded position)."""
    from PIL import Image
    from transformers import AutoTokenizer

    from rmspec.inference.encoding import encode_many, make_layout
    from rmspec.vision.collate import VisionEncoder
    from rmspec.vision.marks import PICTURE
    from rmspec.vision.processor import load_processor

    tokenizer = AutoTokenizer.from_pretrained(tiny_vlm)
    processor = load_processor(str(tiny_vlm), tokenizer)
    layout = make_layout(tokenizer, pictures=True)
    conversation = [{"role": "user", "content": PICTURE + PROMPT}]  # a picture's place (rmspec.vision.marks)
    before = encode_many(tokenizer, [(conversation, "Red.")], 4096, layout)[0].ids
    encoder = VisionEncoder(processor, "<|vision_start|><|image_pad|><|vision_end|>")
    encoder([before, before[:-3]], [[Image.new("RGB", (40, 40))], [Image.new("RGB", (40, 40))]])
    after = encode_many(tokenizer, [(conversation, "Red.")], 4096, layout)[0].ids
    assert after == before


def test_a_run_whose_model_lacks_the_processor_reads_the_base_models(tiny_vlm, tmp_path):
    """A run's model/ saved with its tokenizer only: the image processor's settings come from the base
    model the spec names, and the rewards equal those of the complete folder."""
    import shutil

    from helpers.fabricated_run import fabricate_run
    from rmspec.inference import scorers

    model = tmp_path / "model-no-processor"
    shutil.copytree(tiny_vlm, model)
    (model / "processor_config.json").unlink()  # where transformers 5 saves the image processor's settings
    (model / "preprocessor_config.json").unlink(missing_ok=True)
    run = fabricate_run(tmp_path / "run", model, tmp_path / "unused.jsonl")
    spec = run / "spec.yaml"
    spec.write_text(spec.read_text().replace("sentence-transformers/all-MiniLM-L6-v2", str(tiny_vlm)))
    prompt = [
        {"role": "user", "content": [{"type": "image", "image": png((255, 0, 0))}, {"type": "text", "text": PROMPT}]}
    ]
    from_run = scorers.load(run)
    assert from_run.kind == "vision_reward"
    expected = plain_reward(tiny_vlm, [{"type": "image"}, {"type": "text", "text": PROMPT}], [png((255, 0, 0))], "Red.")
    assert from_run.rewards([(prompt, "Red.")]) == pytest.approx([expected], abs=1e-5)
