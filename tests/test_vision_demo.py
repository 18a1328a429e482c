"""The multimodal demo learns from the pictures: a tiny Qwen2-VL trained by `rmspec run` on one-colour
pictures ranks the held-out answers far above chance, while the same held-out rows with grey pictures
stay at chance. Rewards are read by a plain transformers forward of the saved model (the processor's
own chat template over the conversation), not by rmspec's collator."""

from __future__ import annotations

import json

import torch

from helpers.runs import rmspec
from rmspec.vision.demo import write_demo
from rmspec.vision.images import decode_image
from rmspec.vision.models import reward_class
from rmspec.vision.tiny import build_processor


def accuracy(model, processor, path) -> float:
    right = 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        image = decode_image(row["images"][0], base_dir=path.parent)
        texts = [
            processor.apply_chat_template([*row["prompt"], {"role": "assistant", "content": answer}], tokenize=False)
            for answer in (row["chosen"], row["rejected"])
        ]
        inputs = processor(text=texts, images=[image, image], padding=True, padding_side="right", return_tensors="pt")
        with torch.no_grad():
            chosen, rejected = model(**inputs).logits[:, 0].tolist()
        right += chosen > rejected
    return right / len(rows)


def test_demo_learns_the_colour_and_blank_pictures_stay_at_chance(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # 2 threads on 2 shared cores train ~20x slower (REFERENCE 16)
    spec = write_demo(tmp_path, train=240, heldout=80, steps=100, batch=16)
    run = rmspec("run", str(spec), cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    saved = tmp_path / "runs" / "multimodal-demo" / "model"
    from transformers import AutoConfig, AutoTokenizer

    model = reward_class(AutoConfig.from_pretrained(saved)).from_pretrained(saved).eval()
    processor = build_processor()
    processor.tokenizer = AutoTokenizer.from_pretrained(saved)  # the run's own tokenizer (its pad token)
    assert processor.tokenizer.pad_token_id == model.config.pad_token_id
    held_out = accuracy(model, processor, tmp_path / "heldout.jsonl")
    blank = accuracy(model, processor, tmp_path / "blank.jsonl")
    assert held_out >= 0.9, (held_out, blank)
    assert 0.3 <= blank <= 0.7, (held_out, blank)
