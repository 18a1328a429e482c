"""model.vision: freeze keeps the vision tower / projector at their loaded weights through a real run while
the language model trains; min_pixels / max_pixels change the visual tokens the processor makes; bad
values are located spec errors."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from helpers.runs import rmspec
from rmspec.vision.collate import VisionEncoder
from rmspec.vision.demo import write_demo
from rmspec.vision.freeze import freeze, parts
from rmspec.vision.marks import PICTURE_ID
from rmspec.vision.models import reward_class
from rmspec.vision.processor import load_processor
from rmspec.vision.tiny import build_tiny_vlm, build_tokenizer, tiny_config


def spec_problems(tmp_path, vision: dict) -> str:
    from rmspec.errors import SpecError
    from rmspec.spec import load_spec

    doc = {
        "version": 1,
        "name": "t",
        "model": {"name_or_path": "m", "vision": vision},
        "data": {"source": {"kind": "files", "paths": ["d.jsonl"]}},
        "approach": {"kind": "bradley_terry"},
    }
    (tmp_path / "spec.yaml").write_text(json.dumps(doc))
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "spec.yaml")
    return "\n".join(issue.render_plain() for issue in caught.value.issues)


def test_bad_vision_options_are_located(tmp_path):
    assert "min_pixels 5000 is over max_pixels 4000" in spec_problems(
        tmp_path, {"min_pixels": 5000, "max_pixels": 4000}
    )
    assert "model.vision: freeze names a part twice" in spec_problems(
        tmp_path, {"freeze": ["vision_tower", "vision_tower"]}
    )
    assert "model.vision.freeze" in spec_problems(tmp_path, {"freeze": ["language_model"]})


def test_freeze_finds_the_parts():
    torch.set_num_threads(1)
    config = tiny_config(build_tokenizer())
    model = reward_class(config)(config)
    found = parts(model)
    assert found["vision_tower"] and found["projector"]
    counted = sum(p.numel() for p in found["vision_tower"]) + sum(p.numel() for p in found["projector"])
    assert counted == sum(p.numel() for p in model.model.visual.parameters())
    frozen = freeze(model, ["projector"])
    assert frozen["projector"] == sum(p.numel() for p in model.model.visual.merger.parameters())
    assert not any(p.requires_grad for p in model.model.visual.merger.parameters())
    assert all(p.requires_grad for p in model.model.visual.blocks.parameters())
    from transformers import BertConfig, BertForSequenceClassification

    with pytest.raises(ValueError, match="no vision_tower"):
        freeze(
            BertForSequenceClassification(
                BertConfig(
                    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=50
                )
            ),
            ["vision_tower"],
        )


def test_resolution_changes_the_visual_tokens(tmp_path):
    folder = build_tiny_vlm(tmp_path / "vlm")
    tokenizer = build_tokenizer()
    image = Image.new("RGB", (64, 64), (1, 2, 3))
    counts = []
    for bounds in ({}, {"min_pixels": 28 * 28 * 16, "max_pixels": 28 * 28 * 16}):
        processor = load_processor(str(folder), tokenizer, **bounds)
        encoder = VisionEncoder(processor, "<|vision_start|><|image_pad|><|vision_end|>")
        ids = [PICTURE_ID, *tokenizer("x", add_special_tokens=False)["input_ids"]]  # as the data stage writes it
        batch = encoder([ids], [["data:image/png;base64," + png_b64(image)]])
        counts.append(int(batch["mm_token_type_ids"].sum()))
    assert counts == [4, 16]


def png_b64(image) -> str:
    import base64
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_a_run_with_a_frozen_vision_tower_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = write_demo(tmp_path, train=32, heldout=8, steps=3, batch=8)
    text = spec.read_text().replace(
        "  name_or_path: tiny-vlm\n",
        "  name_or_path: tiny-vlm\n  vision: {freeze: [vision_tower], min_pixels: 12544, max_pixels: 12544}\n",
    )
    spec.write_text(text)
    run = rmspec("run", str(spec), cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "frozen vision_tower" in (tmp_path / "runs" / "multimodal-demo" / "train.log").read_text()
    # The model card's Use section is the snippet that loads it in plain transformers (tests/test_vision_model.py runs it).
    card = (tmp_path / "runs" / "multimodal-demo" / "model" / "README.md").read_text()
    assert 'register_checkpoint_conversion_mapping("Qwen2VLForSequenceClassification"' in card
    before = load_file(str(tmp_path / "tiny-vlm" / "model.safetensors"))
    after = load_file(str(tmp_path / "runs" / "multimodal-demo" / "model" / "model.safetensors"))
    # RUN/model carries the image processor at the run's resolution: it scores as it trained, alone.
    from rmspec.vision.tokens import settings_of

    saved = settings_of(tmp_path / "runs" / "multimodal-demo" / "model")
    assert saved is not None and (saved.min_pixels, saved.max_pixels) == (12544, 12544)
    assert settings_of(tmp_path / "tiny-vlm") != saved
    tower = [k for k in before if k.startswith("visual.") and not k.startswith("visual.merger.")]
    assert tower and all(torch.equal(before[k], after[k]) for k in tower)
    merger = [k for k in before if k.startswith("visual.merger.")]
    language = [k for k in before if k.startswith("model.layers.")]
    assert any(not torch.equal(before[k], after[k]) for k in merger)
    assert any(not torch.equal(before[k], after[k]) for k in language)


def test_lora_goes_on_the_language_model_only_unless_all():
    from types import SimpleNamespace

    from rmspec.train.modeling import apply_lora

    torch.set_num_threads(1)
    config = tiny_config(build_tokenizer())
    lora = SimpleNamespace(r=4, alpha=8.0, dropout=0.0, target_modules="all-linear")

    def adapted(language_model_only: bool, targets="all-linear") -> list[str]:
        lora.target_modules = targets
        wrapped = apply_lora(reward_class(config)(config), lora, "bradley_terry", language_model_only)
        return [n for n, _ in wrapped.named_parameters() if "lora_A" in n]

    everywhere = adapted(False)
    language = adapted(True)
    assert any(".visual." in n for n in everywhere)
    assert language and not any(".visual." in n for n in language)
    assert {n for n in everywhere if ".visual." not in n} == set(language)
    assert all(n.split(".lora_A")[0].endswith("q_proj") for n in adapted(True, ["q_proj"]))
    with pytest.raises(ValueError, match="names no linear layer"):
        adapted(True, ["qkv"])  # a vision-only name
