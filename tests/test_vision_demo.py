"""The multimodal demo, as a user gets it: `rmspec init --example multimodal` builds the pictures and
the tiny Qwen2-VL (a subprocess: init stays light), `rmspec run` trains it, and the run's own
evaluation scores with the images. Checked against a plain transformers forward of RUN/model alone
(its config, weights, tokenizer and saved image processor; the processor's own chat template), not
rmspec's collator: results.json's held-out accuracy and every per-pair reward equal it, far above
chance, while the benchmark of the same rows with grey pictures stays at chance."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.runs import rmspec
from rmspec.vision.images import decode_image
from rmspec.vision.models import reward_class
from rmspec.vision.tiny import processor_class


def plain_rewards(model, processor, path) -> dict[str, tuple[float, float]]:
    out = {}
    for row in (json.loads(line) for line in path.read_text().splitlines()):
        image = decode_image(row["images"][0], base_dir=path.parent)
        texts = [
            processor.apply_chat_template([*row["prompt"], {"role": "assistant", "content": answer}], tokenize=False)
            for answer in (row["chosen"], row["rejected"])
        ]
        inputs = processor(text=texts, images=[image, image], padding=True, padding_side="right", return_tensors="pt")
        with torch.no_grad():
            chosen, rejected = model(**inputs).logits[:, 0].tolist()
        out[row["id"]] = (chosen, rejected)
    return out


def accuracy(rewards: dict[str, tuple[float, float]]) -> float:
    return sum(c > r for c, r in rewards.values()) / len(rewards)


def test_init_example_runs_and_the_run_scores_with_its_images(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # 2 threads on 2 shared cores train ~20x slower (REFERENCE 16)
    init = rmspec("init", "--example", "multimodal", cwd=tmp_path, timeout=300)
    assert init.returncode == 0, init.stderr
    assert "multimodal.yaml" in init.stdout and (tmp_path / "multimodal" / "tiny-vlm" / "config.json").is_file()
    run = rmspec("run", "multimodal.yaml", cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    root = tmp_path / "runs" / "multimodal-demo"
    saved = root / "model"
    # The folder loads alone: it keeps the image processor training used (transformers 5 writes it
    # inside processor_config.json; older versions beside it as preprocessor_config.json).
    assert any((saved / name).is_file() for name in ("processor_config.json", "preprocessor_config.json"))
    # The run says how it packed, and it is what the plan predicted (prompt-once with M-RoPE).
    status = json.loads((root / "status.json").read_text())
    plan = json.loads((root / "plan.json").read_text())
    assert status["packing"] == plan["packing"] == "shared_prefix", (status.get("packing"), plan.get("packing"))
    assert "M-RoPE" in status["packing_reason"]
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer

    model = reward_class(AutoConfig.from_pretrained(saved)).from_pretrained(saved).eval()
    tokenizer = AutoTokenizer.from_pretrained(saved)
    processor = processor_class()(
        image_processor=AutoImageProcessor.from_pretrained(saved),
        tokenizer=tokenizer,
        chat_template=tokenizer.chat_template,
    )
    held_out = plain_rewards(model, processor, tmp_path / "multimodal" / "heldout.jsonl")
    blank = plain_rewards(model, processor, tmp_path / "multimodal" / "blank.jsonl")
    results = json.loads((root / "results.json").read_text())
    per_pair = (root / "eval" / "validation.jsonl").read_text().splitlines()
    scored = {r["id"]: (r["score_chosen"], r["score_rejected"]) for r in map(json.loads, per_pair)}
    assert scored.keys() == held_out.keys()
    for key, pair in held_out.items():
        assert scored[key] == pytest.approx(pair, abs=1e-4), key
    assert results["validation"]["overall"] == pytest.approx(accuracy(held_out))
    assert accuracy(held_out) >= 0.9, (accuracy(held_out), accuracy(blank))
    assert results["benchmarks"]["blank"]["overall"] == pytest.approx(accuracy(blank))  # named by its file
    assert 0.3 <= accuracy(blank) <= 0.7, (accuracy(held_out), accuracy(blank))
    # `rmspec score RUN` reads the pictures too (the vision_reward kind), from the saved folder alone
    out = tmp_path / "scored.jsonl"
    score = rmspec("score", str(root), str(tmp_path / "multimodal" / "heldout.jsonl"), "--out", str(out), cwd=tmp_path)
    assert score.returncode == 0, score.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["reward_chosen"], r["reward_rejected"]) for r in rows] == [
        pytest.approx(pair, abs=1e-4) for pair in held_out.values()
    ]
