"""A literal `<image>` in a message's text is text (issue 47 item 1): `rmspec score`, `rmspec serve` and
training read it as the characters it is, and the rewards equal a plain transformers forward of the same
conversation (the processor's own chat template and image handling, on the tiny offline Qwen2-VL). A
picture's place is carried as an id no text encodes to (rmspec.vision.marks), never read out of text.
LLaVA-style data (`<image>` in a prompt that has images) keeps its documented rule; a row whose places and
images disagree is rejected at its file:line, and the other rows are kept (one bad row never fails its batch).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.runs import rmspec

TAG = "What is the `<image>` tag?"


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    need("torch")
    from rmspec.vision.tiny import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"), seed=5)


def png(colour, size=(40, 40)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def plain_reward(model_dir: Path, user_parts: list[dict], images: list[bytes], response: str) -> float:
    """Plain transformers: the checkpoint's class, its processor and chat template, one conversation."""
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


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def test_score_reads_a_literal_image_tag_as_text(tiny_vlm, tmp_path):
    """`rmspec score` (the CLI): a text-only prompt and a reply that name `<image>` are scored as text; a
    LLaVA-style `<image>` in a prompt with a picture is that picture; bad rows go to the rejects file."""
    red = png((255, 0, 0))
    (tmp_path / "red.png").write_bytes(red)
    parts = [{"type": "image"}, text("What does <image> do?")]
    rows = [
        {"prompt": TAG, "response": "It embeds a picture; write `<image>` there.", "images": []},
        {
            "prompt": [{"role": "user", "content": parts}],
            "response": "Use the `<image>` element.",
            "images": ["red.png"],
        },
        {"prompt": "<image>Which colour?", "response": "Red, not <image>.", "images": ["red.png"]},
        {"prompt": "<image> or <image>?", "response": "Two places, one picture.", "images": ["red.png"]},
        {"prompt": "A stray \ufffc character.", "response": "Fine.", "images": []},
        {"prompt": "No picture here.", "response": "Fine.", "images": []},
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "scored.jsonl"
    result = rmspec("score", str(tiny_vlm), str(source), "--out", str(out), "--json", "--batch-size", "4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "internal error" not in result.stderr
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["response"] for r in scored] == [rows[i]["response"] for i in (0, 1, 2, 5)]
    expected = [
        plain_reward(tiny_vlm, [text(TAG)], [], rows[0]["response"]),
        plain_reward(tiny_vlm, parts, [red], rows[1]["response"]),
        plain_reward(tiny_vlm, [{"type": "image"}, text("Which colour?")], [red], rows[2]["response"]),
        plain_reward(tiny_vlm, [text("No picture here.")], [], "Fine."),
    ]
    assert [r["reward"] for r in scored] == pytest.approx(expected, abs=1e-5)
    assert len({round(e, 5) for e in expected}) == 4  # the rows differ: the comparison can fail
    rejects = [json.loads(line) for line in out.with_name("scored.rejects.jsonl").read_text().splitlines()]
    assert [(r["row"], r["reason_kind"]) for r in rejects] == [(3, "image_count_mismatch"), (4, "image_mark_in_text")]
    assert "2 '<image>' placeholder(s)" in rejects[0]["reason"] and "image_placeholder" in rejects[0]["reason"]


def test_serve_scores_a_literal_image_tag_as_text(tiny_vlm):
    """`rmspec serve` (/pooling): a conversation whose text holds `<image>` gets a reward, equal to the plain
    forward of the same text; a text that forges a picture's place is a 400 naming the field."""
    need("fastapi")
    import base64

    from fastapi.testclient import TestClient

    from rmspec.inference.engine import load_scorer
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    red = png((255, 0, 0), (56, 28))
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(red).decode()}}
    reply = "Use the <image> element."
    with TestClient(create_app(Service(load_scorer(tiny_vlm), model_name="m", normalize=False))) as client:

        def reward(messages):
            answer = client.post("/pooling", json={"messages": messages, "use_activation": False})
            assert answer.status_code == 200, answer.text
            return answer.json()["data"][0]["data"][0]

        only_text = reward([{"role": "user", "content": TAG}, {"role": "assistant", "content": reply}])
        with_picture = reward(
            [{"role": "user", "content": [picture, text(TAG)]}, {"role": "assistant", "content": reply}]
        )
        forged = client.post(
            "/pooling",
            json={
                "messages": [
                    {"role": "user", "content": [text("A \ufffc here")]},
                    {"role": "assistant", "content": "x"},
                ]
            },
        )
    assert forged.status_code == 400 and "messages.0.content.0" in forged.text
    assert only_text == pytest.approx(plain_reward(tiny_vlm, [text(TAG)], [], reply), abs=1e-5)
    assert with_picture == pytest.approx(plain_reward(tiny_vlm, [{"type": "image"}, text(TAG)], [red], reply), abs=1e-5)
    assert abs(only_text - with_picture) > 1e-4


def test_a_literal_image_tag_in_a_reply_trains(tiny_vlm, tmp_path):
    """The data stage and the training collator: rows whose replies (and a text-only prompt) hold `<image>`
    are kept and train (a Bradley-Terry step with finite gradients, the vision tower's included); the
    reply's `<image>` reaches the model as text; a LLaVA-style row with more placeholders than pictures is
    rejected at its file:line with the reason, and the other rows are kept."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoConfig, AutoTokenizer

    from helpers.data import make_spec, write_jsonl
    from rmspec.data import prepare
    from rmspec.train.factory import vision_encoder
    from rmspec.vision.collate import VisionPairCollator
    from rmspec.vision.marks import PICTURE_ID
    from rmspec.vision.models import reward_class

    (tmp_path / "red.png").write_bytes(png((255, 0, 0)))
    (tmp_path / "blue.png").write_bytes(png((0, 0, 255), (56, 28)))
    rows = [
        {
            "prompt": "<image>Which colour?",
            "chosen": "Red; the <image> tag is HTML.",
            "rejected": "Blue.",
            "images": ["red.png"],
        },
        {"prompt": TAG, "chosen": "It embeds a picture.", "rejected": "A <image> is a cat.", "images": []},
        {"prompt": "<image>Colour?", "chosen": "Blue.", "rejected": "Use <image>.", "images": ["blue.png"]},
        {"prompt": "<image> and <image>?", "chosen": "a", "rejected": "b", "images": ["red.png"]},
    ]
    write_jsonl(tmp_path / "pairs.jsonl", rows)
    loaded = make_spec(
        tmp_path,
        {"source": {"kind": "files", "paths": ["pairs.jsonl"]}, "mapping": {"preset": "pairs"}},
        extra={"model": {"name_or_path": str(tiny_vlm)}},
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_vlm)
    rejects = tmp_path / "rejects.jsonl"
    prepared = prepare(loaded, tokenizer, rejects_path=rejects, cache_dir=tmp_path / "cache")
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert [(x["source_index"], x["reason"]) for x in lines] == [(3, "image_count_mismatch")]
    assert lines[0]["detail"].startswith(f"{tmp_path / 'pairs.jsonl'}:4: ")
    kept = list(prepared.train) + list(prepared.validation or [])
    assert len(kept) == 3
    for row in kept:  # each picture's place is one PICTURE_ID, and only pictures are
        for side in ("chosen_input_ids", "rejected_input_ids"):
            assert row[side].count(PICTURE_ID) == len(row["images"] or [])
    config = AutoConfig.from_pretrained(tiny_vlm)
    torch.manual_seed(0)
    model = reward_class(config).from_pretrained(tiny_vlm).train()
    batch = VisionPairCollator(vision_encoder(model, tokenizer))(kept)
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((batch["input_ids"] == image_pad).sum()) == int(batch["mm_token_type_ids"].sum()) > 0
    replies = tokenizer.batch_decode(batch["input_ids"], skip_special_tokens=False)
    assert sum("<image>" in r for r in replies) == 4  # the replies' `<image>`: text, as written
    scores = model(**{k: v for k, v in batch.items() if k != "margin"}).logits[:, 0]
    half = scores.shape[0] // 2
    loss = -F.logsigmoid(scores[:half] - scores[half:]).mean()
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert torch.isfinite(loss) and any(".visual." in n for n in grads)
    assert all(torch.isfinite(g).all() for g in grads.values())


def test_a_family_whose_image_token_is_image_reads_it_as_text():
    """LLaVA's tokenizer has `<image>` as its image token: written in a message it is text, encoded as its
    characters (the plain tokenizer would give the image token, which the model would fill with a picture
    that is not there); the collator's image tokens are exactly the one picture's."""
    need("torch")
    import base64

    from helpers.tiny_families import FAMILIES
    from rmspec.data.layout import Layout
    from rmspec.vision.collate import VisionEncoder
    from rmspec.vision.marks import PICTURE, PICTURE_ID
    from rmspec.vision.processor import image_text

    config, processor = FAMILIES["llava"]()
    tokenizer = processor.tokenizer
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    assert image_id in tokenizer("a <image> b", add_special_tokens=False)["input_ids"]  # the hazard
    layout = Layout(tokenizer, pictures=True)
    (ids,) = layout.encode([f"{PICTURE}What is the <image> tag?"])
    assert ids[0] == PICTURE_ID and image_id not in ids
    assert tokenizer.decode(ids[1:]) == "What is the <image> tag?"
    picture = "data:image/png;base64," + base64.b64encode(png((0, 255, 0), (30, 30))).decode()
    batch = VisionEncoder(processor, image_text(config, processor))([ids], [[picture]])
    alone = VisionEncoder(processor, image_text(config, processor))([[PICTURE_ID]], [[picture]])
    assert int((batch["input_ids"] == image_id).sum()) == int((alone["input_ids"] == image_id).sum()) > 1
    # a text model's layout is unchanged: the character is text there
    assert Layout(tokenizer).encode([PICTURE])[0] == tokenizer(PICTURE, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize(
    ("prompt", "images", "placeholder", "first", "expected"),
    [
        ("<image>Colour?", 1, "<image>", False, "\ufffcColour?"),  # LLaVA-style: the source's rule
        ("What is <image>?", 0, "<image>", False, "What is <image>?"),  # no pictures: text
        ("Colour?", 2, "<image>", True, "\ufffc\ufffcColour?"),  # rlaif-v: pictures first
        ("What is <image>?", 1, None, False, "\ufffcWhat is <image>?"),  # image_placeholder: null
        ("<image> or <image>?", 1, "<image>", False, "count_mismatch"),
        ("Colour?", 1, "<image>", False, "count_mismatch"),
    ],
)
def test_the_placeholder_rule(prompt, images, placeholder, first, expected):
    from rmspec.vision.images import ImageReject
    from rmspec.vision.rows import place_pictures

    try:
        got = place_pictures(prompt, images, placeholder, first=first)
    except ImageReject as exc:
        got = exc.reason
    assert got == expected
    whole = [{"role": "user", "content": prompt}, {"role": "assistant", "content": "<image> stays."}]
    try:
        placed = place_pictures(whole, images, placeholder, whole=True, first=first)
    except ImageReject as exc:
        assert exc.reason == expected
    else:
        assert placed[0]["content"] == expected and placed[1]["content"] == "<image> stays."
