"""max_length counts what the model reads: each image as its visual tokens, not its placeholder.

The independent computation is the processor itself (the tiny Qwen2-VL processor, as the collator
calls it): a kept row's ids decoded, its placeholders written as the model's image part, and the
processor's expanded input_ids counted. A row that fits only while each image counts as its
placeholder is now rejected (drop) or cut (truncate_prompt_left) exactly to max_length; a cut that
would reach an image's placeholder rejects the row; model.vision's pixel bounds change the count
(and the data report's visual tokens) as they change the processor's.
"""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from helpers.data import make_spec, write_jsonl
from rmspec.vision import marks
from rmspec.vision.processor import IMAGE_TEXT
from rmspec.vision.tiny import build_processor

MIN, MAX = 784, 28 * 28 * 16  # the checkpoint's bounds: a 112x112 image is 16 visual tokens
PROMPT = "Look at <image>and say which colour it is, in one short word."


def _setup(tmp_path, size=(112, 112), prompt=PROMPT):
    model_dir = tmp_path / "vlm"
    build_processor(min_pixels=MIN, max_pixels=MAX).save_pretrained(model_dir)
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 0, 0)).save(buffer, format="PNG")
    (tmp_path / "0.png").write_bytes(buffer.getvalue())
    write_jsonl(
        tmp_path / "pairs.jsonl", [{"prompt": prompt, "chosen": "red", "rejected": "blue", "images": ["0.png"]}]
    )
    return model_dir


def _prepare(tmp_path, model_dir, max_length, policy="drop", vision=None):
    from transformers import AutoTokenizer

    from rmspec.data import prepare

    model = {"name_or_path": str(model_dir), **({"vision": vision} if vision else {})}
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["pairs.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [{"kind": "max_length", "policy": policy}],
        },
        max_length=max_length,
        extra={"model": model},
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rejects = tmp_path / f"rejects-{max_length}-{policy}.jsonl"
    try:
        prepared = prepare(loaded, tokenizer, rejects_path=rejects, cache_dir=tmp_path / f"cache-{max_length}-{policy}")
    except Exception as exc:  # no training rows left: the rejects file says why
        if "no training rows" not in str(exc):
            raise
        prepared = None
    lines = [json.loads(x) for x in rejects.read_text().splitlines()] if rejects.exists() else []
    return prepared, lines


def _longest(row, **bounds) -> int:
    """A pair's longer side as the model reads it (a prompt cut is sized so that it fits)."""
    return max(
        _processor_length(row["chosen_input_ids"], **bounds), _processor_length(row["rejected_input_ids"], **bounds)
    )


def _processor_length(ids, **bounds) -> int:
    """What the collator hands the model: the ids decoded, each picture mark the image part, expanded."""
    processor = build_processor(**({"min_pixels": MIN, "max_pixels": MAX} | bounds))
    text = marks.decode(processor.tokenizer, ids).replace(marks.PICTURE, IMAGE_TEXT["qwen2_vl"])
    image = Image.new("RGB", (112, 112), (200, 0, 0))
    return int(processor(text=[text], images=[image], return_tensors="pt")["input_ids"].shape[1])


def test_lengths_are_the_processors_expanded_lengths(tmp_path):
    model_dir = _setup(tmp_path)
    prepared, _ = _prepare(tmp_path, model_dir, 4096)
    row = prepared.train[0]
    expanded = _processor_length(row["chosen_input_ids"])
    assert expanded > len(row["chosen_input_ids"])  # 16 visual tokens for a one-id picture mark
    lengths = prepared.report.to_json()["token_lengths"]  # one row: its figures are the row's
    assert lengths["chosen_sequence"]["max"] == expanded
    assert lengths["rejected_sequence"]["max"] == _processor_length(row["rejected_input_ids"])
    from rich.console import Console

    from rmspec.render.data_view import print_report

    console = Console(record=True, width=400)
    print_report(prepared.report.to_json(), console=console)
    shown = " ".join(console.export_text().split())
    visual = (
        expanded - len(row["chosen_input_ids"]) + 1 - 3 + 1
    )  # the image's tokens: 16 (its place one id; the part 3 tokens, one the pad)
    assert visual == 16
    assert "images: 1 in 1 of 1 rows" in shown and "visual tokens per row: mean 16, max 16" in shown
    assert "the token lengths above include them" in shown


def test_a_row_fitting_only_with_placeholders_is_dropped_with_its_reason(tmp_path):
    model_dir = _setup(tmp_path)
    prepared, _ = _prepare(tmp_path, model_dir, 4096)
    row = prepared.train[0]
    text_len = max(len(row["chosen_input_ids"]), len(row["rejected_input_ids"]))
    expanded = _longest(row)
    limit = expanded - 1
    assert text_len <= limit  # counted as placeholders, the row would fit
    dropped, rejects = _prepare(tmp_path, model_dir, limit)
    assert dropped is None and len(rejects) == 1
    assert rejects[0]["reason"] == "too_long" and "visual tokens" in rejects[0]["detail"]
    kept, rejects = _prepare(tmp_path, model_dir, expanded)
    assert rejects == [] and kept.train[0]["chosen_input_ids"] == row["chosen_input_ids"]


def test_a_prompt_cut_fits_the_expanded_sequence_to_max_length(tmp_path):
    model_dir = _setup(tmp_path)
    full, _ = _prepare(tmp_path, model_dir, 4096)
    expanded = _longest(full.train[0])
    cut, rejects = _prepare(tmp_path, model_dir, expanded - 3, policy="truncate_prompt_left")
    assert rejects == []
    row = cut.train[0]
    assert cut.report.truncation_rate == 1.0
    assert _longest(row) == expanded - 3  # as a text row: cut to the limit exactly
    assert marks.PICTURE in cut.train[0]["prompt"]


def test_a_cut_that_reaches_the_image_rejects_the_row(tmp_path):
    model_dir = _setup(tmp_path, prompt="<image>Which colour is this picture, in one short word?")
    full, _ = _prepare(tmp_path, model_dir, 4096)
    expanded = _longest(full.train[0])
    # "user\n" (5 tokens) is all the cut may take before it reaches the placeholder
    _, rejects = _prepare(tmp_path, model_dir, expanded - 6, policy="truncate_prompt_left")
    assert [r["reason"] for r in rejects] == ["image_cut"]
    assert "raise training.max_length" in rejects[0]["detail"]
    kept, rejects = _prepare(tmp_path, model_dir, expanded - 5, policy="truncate_prompt_left")
    assert rejects == [], rejects
    assert _longest(kept.train[0]) == expanded - 5


@pytest.mark.parametrize(
    "bounds", [{"max_pixels": 28 * 28 * 4}, {"min_pixels": 28 * 28 * 36, "max_pixels": 28 * 28 * 64}]
)
def test_model_vision_bounds_change_the_count_as_they_change_the_processor(tmp_path, bounds):
    model_dir = _setup(tmp_path)
    prepared, _ = _prepare(tmp_path, model_dir, 4096, vision=bounds)
    row = prepared.train[0]
    assert prepared.report.token_lengths["chosen_sequence"]["max"] == _processor_length(
        row["chosen_input_ids"], **bounds
    )
    processor = build_processor(**({"min_pixels": MIN, "max_pixels": MAX} | bounds))
    grid = processor.image_processor(images=[Image.new("RGB", (112, 112))], return_tensors="pt")["image_grid_thw"][0]
    images = prepared.report.to_json()["images"]
    assert images["visual_tokens_per_row"]["max"] == int(grid.prod()) // 4 != 16
    assert images["processor"]["max_pixels"] == bounds["max_pixels"]


def test_other_families_are_not_counted_with_the_qwen2_vl_rule(tmp_path):
    """A hub-style LLaVA folder (CLIP preprocessor_config.json, processor_config.json with its own
    patch_size) has no Qwen2-VL resize rule: its images are not counted with it (they stay counted as
    their placeholder's tokens, as before); a Qwen2-VL folder is."""
    from rmspec.data.tokenize import visual_count
    from rmspec.vision.tokens import settings_of

    llava = tmp_path / "llava"
    llava.mkdir()
    (llava / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "CLIPImageProcessor"}))
    (llava / "processor_config.json").write_text(json.dumps({"patch_size": 14, "processor_class": "LlavaProcessor"}))
    (llava / "config.json").write_text(json.dumps({"model_type": "llava"}))
    assert settings_of(llava) is None and visual_count(str(llava)) is None
    qwen = _setup(tmp_path)
    assert visual_count(str(qwen)) is not None
    (qwen / "config.json").write_text(json.dumps({"model_type": "gemma3"}))  # another family's config: no count
    assert visual_count(str(qwen)) is None


JUDGE_ROW = {
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this picture closely."},
                {"type": "image"},
                {"type": "text", "text": "Which colour? [[A]] red or [[B]] blue."},
            ],
        },
        {"role": "assistant", "content": "[[A]]"},
    ],
    "images": ["0.png"],
}


def _prepare_judge(tmp_path, model_dir, max_length, policy="drop"):
    """A generative judge's conversation (method sft) with its picture before the reply."""
    from transformers import AutoTokenizer

    from rmspec.data import prepare

    write_jsonl(tmp_path / "chats.jsonl", [JUDGE_ROW])
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["chats.jsonl"]},
            "mapping": {"preset": "messages"},
            "filters": [{"kind": "max_length", "policy": policy}],
        },
        approach={"kind": "generative"},
        max_length=max_length,
        extra={"model": {"name_or_path": str(model_dir)}},
    )
    rejects = tmp_path / f"judge-rejects-{max_length}-{policy}.jsonl"
    try:
        prepared = prepare(
            loaded,
            AutoTokenizer.from_pretrained(model_dir),
            rejects_path=rejects,
            cache_dir=tmp_path / f"jc-{max_length}-{policy}",
        )
    except Exception as exc:
        if "no training rows" not in str(exc):
            raise
        prepared = None
    lines = [json.loads(x) for x in rejects.read_text().splitlines()] if rejects.exists() else []
    return prepared, lines


def test_a_judge_conversation_counts_its_images_visual_tokens(tmp_path):
    """SFT conversations: the length the report gives, the drop at max_length and a prompt cut all read the
    expanded sequence (the processor's), and a cut that reaches the picture rejects the row."""
    model_dir = _setup(tmp_path)
    prepared, _ = _prepare_judge(tmp_path, model_dir, 4096)
    ids = prepared.train[0]["input_ids"]
    expanded = _processor_length(ids)
    assert expanded > len(ids)
    assert prepared.report.to_json()["token_lengths"]["sequence"]["max"] == expanded
    dropped, rejects = _prepare_judge(tmp_path, model_dir, expanded - 1)
    assert (
        dropped is None and [r["reason"] for r in rejects] == ["too_long"] and "visual tokens" in rejects[0]["detail"]
    )
    kept, rejects = _prepare_judge(tmp_path, model_dir, expanded)
    assert rejects == [] and kept.train[0]["input_ids"] == ids
    # a short cut (the words before the picture) fits the expanded sequence to max_length exactly
    cut, rejects = _prepare_judge(tmp_path, model_dir, expanded - 10, "truncate_prompt_left")
    assert rejects == [] and _processor_length(cut.train[0]["input_ids"]) == expanded - 10
    # a cut deeper than the words before the picture would remove it
    before = len(processor_tokens(model_dir, "<|im_start|>user\nLook at this picture closely."))
    gone, rejects = _prepare_judge(tmp_path, model_dir, expanded - before - 5, "truncate_prompt_left")
    assert gone is None and [r["reason"] for r in rejects] == ["image_cut"]


def processor_tokens(model_dir, text: str) -> list[int]:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)(text, add_special_tokens=False)["input_ids"]
