"""Visual tokens per image from the processor's settings equal what the processor itself produces
(image_grid_thw) for sizes around the min/max pixel bounds; the data report counts images per row,
their sizes and visual tokens per row from the model folder's saved processor settings."""

from __future__ import annotations

import io
import json

from PIL import Image

from helpers.data import make_spec, write_jsonl
from rmspec.vision.tiny import build_processor, build_tokenizer
from rmspec.vision.tokens import VisualSettings, settings_of


def test_tokens_match_the_processor():
    for min_pixels, max_pixels in ((784, 4096), (56 * 56, 28 * 28 * 64)):
        processor = build_processor(min_pixels=min_pixels, max_pixels=max_pixels)
        settings = VisualSettings(14, 2, min_pixels, max_pixels)
        for width, height in ((64, 64), (13, 200), (300, 40), (224, 224), (500, 333), (28, 28), (1000, 30)):
            image = Image.new("RGB", (width, height), (10, 20, 30))
            grid = processor.image_processor(images=[image], return_tensors="pt")["image_grid_thw"][0]
            expected = int(grid.prod()) // 4
            assert settings.tokens(width, height) == expected, (min_pixels, max_pixels, width, height)


def test_data_report_counts_images_sizes_and_visual_tokens(tmp_path):
    from rmspec.data import prepare

    model_dir = tmp_path / "vlm"
    processor = build_processor(min_pixels=784, max_pixels=4096)
    processor.save_pretrained(model_dir)  # the model folder's processor settings
    assert settings_of(model_dir) == VisualSettings(14, 2, 784, 4096)
    sizes = [(64, 64), (112, 56), (56, 56)]
    for k, size in enumerate(sizes):
        buffer = io.BytesIO()
        Image.new("RGB", size, (200, 0, 0)).save(buffer, format="PNG")
        (tmp_path / f"{k}.png").write_bytes(buffer.getvalue())
    rows = [
        {"prompt": "<image>one", "chosen": "a", "rejected": "b", "images": ["0.png"]},
        {"prompt": "<image><image>two", "chosen": "c", "rejected": "d", "images": ["1.png", "2.png"]},
    ]
    write_jsonl(tmp_path / "pairs.jsonl", rows)
    loaded = make_spec(
        tmp_path, {"source": {"kind": "files", "paths": ["pairs.jsonl"]}, "mapping": {"preset": "pairs"}}
    )
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(model_dir)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    report = prepare(loaded, tokenizer, rejects_path=tmp_path / "rejects.jsonl", cache_dir=tmp_path / "cache").report
    images = report.to_json()["images"]
    settings = VisualSettings(14, 2, 784, 4096)
    per_row = [settings.tokens(64, 64), settings.tokens(112, 56) + settings.tokens(56, 56)]
    assert images["rows"] == 2 and images["images"] == 3 and images["images_per_row"] == {"mean": 1.5, "max": 2}
    assert images["width"] == {"min": 56, "median": 64, "max": 112}
    assert images["visual_tokens_per_row"] == {"mean": sum(per_row) / 2, "max": max(per_row)}


def test_vision_tower_parameters_count_the_modules():
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from rmspec.vision.models import reward_class
    from rmspec.vision.shapes import vision_tower_parameters
    from rmspec.vision.tiny import tiny_config

    torch.set_num_threads(1)
    config = tiny_config(build_tokenizer())
    model = reward_class(config)(config)
    assert vision_tower_parameters(config.to_dict()) == sum(p.numel() for p in model.model.visual.parameters())
    config25 = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": 300,
            "hidden_size": 64,
            "intermediate_size": 96,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 3, 3]},
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 48,
            "num_heads": 2,
            "out_hidden_size": 64,
            "fullatt_block_indexes": [1],
        },
    )
    model25 = Qwen2_5_VLForConditionalGeneration(config25)
    assert vision_tower_parameters(config25.to_dict()) == sum(p.numel() for p in model25.model.visual.parameters())


def test_the_plan_counts_the_vision_tower():
    from rmspec.plan.model_shape import shape_from_config, vision_notes
    from rmspec.vision.models import reward_class
    from rmspec.vision.tiny import tiny_config

    config = tiny_config(build_tokenizer())
    total = sum(p.numel() for p in reward_class(config)(config).parameters())
    shape = shape_from_config(config.to_dict(), "test")
    # The text side is the planner's estimate; without the tower it would miss ~45% of this model.
    assert abs(shape.trained_parameters("score") - total) / total < 0.02
    assert "79,552 parameters" in vision_notes(shape)[0]


def test_the_plan_says_why_a_vlm_trains_unpacked(tmp_path):
    from helpers.runs import rmspec

    (tmp_path / "vlm").mkdir()
    config = {
        "model_type": "gemma3",
        "architectures": ["Gemma3ForConditionalGeneration"],
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32},
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 300,
            "intermediate_size": 128,
        },
    }
    (tmp_path / "vlm" / "config.json").write_text(json.dumps(config))
    write_jsonl(tmp_path / "pairs.jsonl", [{"prompt": "<image>q", "chosen": "a", "rejected": "b", "images": ["x.png"]}])
    spec = {
        "version": 1,
        "name": "t",
        "model": {"name_or_path": "vlm"},
        "data": {"source": {"kind": "files", "paths": ["pairs.jsonl"]}, "split": {"validation_fraction": None}},
        "approach": {"kind": "bradley_terry"},
        "training": {"max_length": 64, "global_batch_size": 4},
        "hardware": {"device": "cpu"},
    }
    (tmp_path / "spec.yaml").write_text(json.dumps(spec))
    out = rmspec("plan", "spec.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "gemma3 is a vision-language model" in out.stdout and "two sequences per pair" in out.stdout
    spec["training"]["packing"] = "shared_prefix"
    (tmp_path / "spec.yaml").write_text(json.dumps(spec))
    refused = rmspec("plan", "spec.yaml", cwd=tmp_path)
    assert refused.returncode == 2 and "gemma3 is a vision-language model" in refused.stdout + refused.stderr
