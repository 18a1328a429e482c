"""The data stage counts every family's visual tokens as its processor expands them (issue 37 items 1, 5).

The independent computation is the family's own processor (the builder in tests/helpers/tiny_families.py, not
rmspec's load_processor), called as the collator calls it: a kept row's ids decoded, its placeholders
written as the family's image part, the row's images given, the expanded input_ids counted. The data
stage's lengths (which max_length filters on) and the data report's visual tokens must equal it for
LLaVA, LLaVA-OneVision, Idefics3, SmolVLM and Gemma 3; the Qwen2-VL rule must agree with the measured
count; an image the processor refuses rejects its row with the reason instead of crashing training.
"""

from __future__ import annotations

import json
import random

import pytest
from PIL import Image

from helpers.data import make_spec, write_jsonl
from helpers.tiny_families import FAMILIES
from rmspec.vision import marks
from rmspec.vision.processor import IMAGE_TEXT

SIZES = [
    (28, 28),
    (40, 90),
    (120, 30),
]  # square, tall, wide: LLaVA-OneVision / Idefics3 / SmolVLM tile them differently
PROMPT = "Look at <image>and say which colour it is."


def _picture(size, seed, mode="RGB"):
    rng = random.Random(seed)
    image = Image.new("RGB", size)
    image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(size[0] * size[1])])
    return image.convert(mode)


def _family(family):
    """The tiny family's config and processor; Gemma 3 with 4 soft tokens per image (the tiny
    checkpoint's 1 makes its image part, 7 tokens expanded, exactly as long as the 7-byte placeholder,
    so a count that ignored the image would pass; a real Gemma 3 has 256)."""
    config, processor = FAMILIES[family]()
    if family == "gemma3":
        from transformers import Gemma3Processor

        config.mm_tokens_per_image = 4
        processor = Gemma3Processor(
            processor.image_processor, processor.tokenizer, chat_template=processor.chat_template, image_seq_length=4
        )
    return config, processor


def _family_dir(tmp_path, family):
    """The family's config and processor as a base checkpoint folder has them (no weights: the data
    stage reads config.json, the tokenizer and the processor settings only)."""
    config, processor = _family(family)
    folder = tmp_path / family
    config.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def _rows(tmp_path, sizes, prompt=PROMPT):
    rows = []
    for k, size in enumerate(sizes):
        names = []
        for j, s in enumerate(size if isinstance(size, list) else [size]):
            name = f"{k}-{j}.png"
            _picture(s, seed=10 * k + j).save(tmp_path / name)
            names.append(name)
        text = prompt if len(names) == 1 else prompt.replace("<image>", "<image>" * len(names))
        rows.append({"prompt": text, "chosen": "red", "rejected": "blue, quite", "images": names})
    write_jsonl(tmp_path / "pairs.jsonl", rows)
    return rows


def _prepare(tmp_path, model_dir, max_length, policy="drop", tag="a"):
    from transformers import AutoTokenizer

    from rmspec.data import prepare

    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["pairs.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [{"kind": "max_length", "policy": policy}],
        },
        max_length=max_length,
        extra={"model": {"name_or_path": str(model_dir)}},
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rejects = tmp_path / f"rejects-{tag}.jsonl"
    try:
        prepared = prepare(loaded, tokenizer, rejects_path=rejects, cache_dir=tmp_path / f"cache-{tag}")
    except Exception as exc:  # no training rows left: the rejects file says why
        if "no training rows" not in str(exc):
            raise
        prepared = None
    lines = [json.loads(x) for x in rejects.read_text().splitlines()] if rejects.exists() else []
    return prepared, lines


def _expanded(processor, family, ids, names, folder):
    """(input_ids length, image tokens) of one sequence as the collator hands it to the model."""
    text = marks.decode(processor.tokenizer, ids).replace(marks.PICTURE, IMAGE_TEXT[family])
    images = [Image.open(folder / name).convert("RGB") for name in names]
    out = processor(text=[text], images=[images])["input_ids"][0]
    return len(out), list(out).count(_image_token(family))


def _image_token(family):
    """The id the model fills with image features (Gemma 3's processor image_token is its boi token)."""
    config, _ = _family(family)
    return getattr(config, "image_token_id", None) or config.image_token_index


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_lengths_and_report_are_the_processors_expansion(tmp_path, family):
    model_dir = _family_dir(tmp_path, family)
    _rows(tmp_path, [*SIZES, [SIZES[1], SIZES[2]]])  # three sizes, and a row with two images
    prepared, rejects = _prepare(tmp_path, model_dir, 4096)
    assert rejects == [] and len(prepared.train) == 4
    _, processor = _family(family)
    chosen, rejected, visual = [], [], []
    for row in prepared.train:
        names = row["images"]  # the checked references (absolute paths)
        length, tokens = _expanded(processor, family, row["chosen_input_ids"], names, tmp_path)
        assert length > len(row["chosen_input_ids"])  # the images add positions beyond their placeholders
        chosen.append(length)
        rejected.append(_expanded(processor, family, row["rejected_input_ids"], names, tmp_path)[0])
        visual.append(tokens)
    report = prepared.report.to_json()
    # The report's length distributions are the stage's per-row lengths (what max_length filtered on).
    for side, lengths in (("chosen_sequence", chosen), ("rejected_sequence", rejected)):
        shown = report["token_lengths"][side]
        assert (shown["min"], shown["max"], shown["mean"]) == (min(lengths), max(lengths), round(sum(lengths) / 4, 2))
        assert shown["p50"] == sorted(lengths)[2]
    images = report["images"]
    assert images["visual_tokens_per_row"]["max"] == max(visual)
    assert images["visual_tokens_per_row"]["mean"] == round(sum(visual) / len(visual), 2)
    assert images["processor"]["counted_by"] == "processor" and images["processor"]["model_type"] == family


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_count_depends_on_the_size_only(family):
    """The measured count is kept per (width, height): images of one size but different content and
    colour mode expand to the same tokens; the sizes give different counts where the family tiles."""
    _, processor = FAMILIES[family]()
    part = IMAGE_TEXT[family]
    seen = {}
    for size in [*SIZES, (1, 1), (300, 7), (200, 200)]:
        counts = {
            tuple(processor(text=[part], images=[[_picture(size, seed, mode)]])["input_ids"][0])
            for seed, mode in ((0, "RGB"), (1, "RGB"), (2, "L"), (3, "RGBA"))
        }
        assert len(counts) == 1, (family, size)
        seen[size] = len(counts.pop())
    if family in ("llava_onevision", "idefics3", "smolvlm"):
        assert len(set(seen.values())) > 1  # size-dependent families: the cache key matters


def test_measured_count_equals_the_qwen_rule(tmp_path):
    """The Qwen2-VL light rule (tokens.VisualCount) and the processor's measured count agree, image by
    image, over square, thin and bound-crossing sizes."""
    from rmspec.vision.measured import MeasuredCount
    from rmspec.vision.tiny import build_processor
    from rmspec.vision.tokens import VisualCount, VisualSettings

    low, high = 784, 28 * 28 * 16
    processor = build_processor(min_pixels=low, max_pixels=high)
    rule = VisualCount(VisualSettings(patch_size=14, merge_size=2, min_pixels=low, max_pixels=high))
    measured = MeasuredCount(str(tmp_path), "qwen2_vl", processor.tokenizer, IMAGE_TEXT["qwen2_vl"])
    measured._processor = processor  # the checkpoint's processor, as load_processor builds it
    for k, size in enumerate([(28, 28), (112, 112), (40, 90), (300, 7), (1000, 900), (10, 1990), (57, 29)]):
        path = tmp_path / f"{k}.png"
        _picture(size, k).save(path)
        assert measured.image_tokens(str(path)) == rule.image_tokens(str(path)), size


def test_an_image_the_processor_refuses_rejects_its_row(tmp_path):
    """Qwen2-VL refuses an aspect ratio over 200: the row is rejected as image_processor_refused (the
    others kept), by the light rule and by the measured count alike."""
    from rmspec.vision.images import ImageReject
    from rmspec.vision.measured import MeasuredCount
    from rmspec.vision.tiny import build_processor

    model_dir = tmp_path / "qwen"
    build_processor(min_pixels=784, max_pixels=28 * 28 * 16).save_pretrained(model_dir)
    _rows(tmp_path, [(56, 56), (2010, 10), (40, 40)])
    prepared, rejects = _prepare(tmp_path, model_dir, 4096)
    assert len(prepared.train) == 2
    assert [r["reason"] for r in rejects] == ["image_processor_refused"]
    assert "images[0] 2010x10" in rejects[0]["detail"] and "aspect ratio" in rejects[0]["detail"]
    assert rejects[0]["source_index"] == 1  # located: the file's second row
    assert prepared.report.to_json()["rejected"] == {"image_processor_refused": 1}  # counted in the report
    processor = build_processor()
    measured = MeasuredCount(str(model_dir), "qwen2_vl", processor.tokenizer, IMAGE_TEXT["qwen2_vl"])
    measured._processor = processor
    with pytest.raises(ImageReject) as refused:
        measured.image_tokens(str(tmp_path / "1-0.png"))
    assert refused.value.reason == "processor_refused" and "200" in refused.value.detail


@pytest.mark.parametrize("family", ["idefics3", "llava_onevision"])
def test_a_row_fitting_only_as_a_one_token_image_is_dropped(tmp_path, family):
    model_dir = _family_dir(tmp_path, family)
    _rows(tmp_path, [SIZES[1]])
    full, _ = _prepare(tmp_path, model_dir, 4096, tag="full")
    row = full.train[0]
    _, processor = _family(family)
    expanded = max(
        _expanded(processor, family, row[k], row["images"], tmp_path)[0]
        for k in ("chosen_input_ids", "rejected_input_ids")
    )
    one_token = max(len(row["chosen_input_ids"]), len(row["rejected_input_ids"]))  # "<image>" is one token here
    assert one_token < expanded - 1
    dropped, rejects = _prepare(tmp_path, model_dir, expanded - 1, tag="tight")
    assert dropped is None and [r["reason"] for r in rejects] == ["too_long"]
    assert "visual tokens" in rejects[0]["detail"]
    kept, rejects = _prepare(tmp_path, model_dir, expanded, tag="exact")
    assert rejects == [] and kept.train[0]["chosen_input_ids"] == row["chosen_input_ids"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_plans_light_rule_is_the_processors_fixed_count(tmp_path, family):
    """LLaVA and Gemma 3 give every image the same visual tokens: the light rule (no transformers)
    reads it from the saved settings and equals the processor's image tokens at any size; the other
    families have none, and the plan's line says the data report gives their figure, then shows it."""
    from rmspec.plan.vision import other_family_note
    from rmspec.vision.tokens import fixed_tokens_per_image

    model_dir = _family_dir(tmp_path, family)
    _, processor = _family(family)
    part = IMAGE_TEXT[family]
    counts = {
        list(processor(text=[part], images=[[_picture(size, 0)]])["input_ids"][0]).count(_image_token(family))
        for size in [*SIZES, (300, 7)]
    }
    fixed = fixed_tokens_per_image(model_dir)
    report = tmp_path / "data_report.json"
    note = " ".join(other_family_note(str(model_dir), report, 512))
    if family in ("llava", "gemma3"):
        assert counts == {fixed}
        assert f"visual tokens per image: {fixed} " in note
    else:
        assert fixed is None and len(counts) > 1
        assert "depend on the image's size" in note
    assert f"rmspec data report SPEC --json > {report}" in note
    report.write_text(
        json.dumps(
            {
                "images": {
                    "rows": 3,
                    "images_per_row": {"mean": 1, "max": 1},
                    "width": {"max": 9},
                    "height": {"max": 9},
                    "visual_tokens_per_row": {"mean": 7.5, "max": 9},
                }
            }
        )
    )
    assert "visual tokens per row: mean 7.5, max 9" in " ".join(other_family_note(str(model_dir), report, 512))


PLAN_SPEC = """version: 1
name: plan-tokens
model: {{name_or_path: {family}}}
data:
  source: {{kind: files, paths: [pairs.jsonl]}}
  mapping: {{preset: pairs}}
approach: {{kind: bradley_terry}}
training: {{max_steps: 1, max_length: 512, global_batch_size: 4, micro_batch_size: 2}}
hardware: {{device: cpu}}
"""


@pytest.mark.parametrize("family", ["llava", "idefics3"])
def test_rmspec_plan_shows_the_families_visual_tokens_and_stays_light(tmp_path, family):
    """`rmspec plan` on a LLaVA / Idefics3 base checkpoint: LLaVA's line gives the fixed count, Idefics3's
    names the data report command; once the report exists (written by the data stage, as a run does) the
    line shows its visual tokens per row. The plan imports no torch / transformers / Pillow."""
    import subprocess
    import sys

    from helpers.tiny_families import build_generation_checkpoint

    build_generation_checkpoint(family, tmp_path / family)
    _rows(tmp_path, [SIZES[0], SIZES[1]])
    (tmp_path / "spec.yaml").write_text(PLAN_SPEC.format(family=family))
    code = (
        "import sys, json\n"
        "from rmspec.cli.main import cli\n"
        "cli.main(['plan', 'spec.yaml', '--json'], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'PIL') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )

    def plan():
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.rstrip().endswith("HEAVY []")
        return " ".join(json.loads(out.stdout[: out.stdout.rindex("HEAVY")])["notes"])

    shown = plan()
    command = "rmspec data report SPEC --json > runs/plan-tokens/data_report.json"
    if family == "llava":
        assert "visual tokens per image: 4 (fixed by the processor's settings" in shown and command in shown
    else:
        assert "depend on the image's size" in shown and command in shown
    from transformers import AutoTokenizer

    from rmspec.data import prepare
    from rmspec.spec import load_spec

    loaded = load_spec(tmp_path / "spec.yaml")
    report = prepare(loaded, AutoTokenizer.from_pretrained(tmp_path / family), cache_dir=tmp_path / "cache")
    (tmp_path / "runs" / "plan-tokens").mkdir(parents=True)
    (tmp_path / "runs" / "plan-tokens" / "data_report.json").write_text(json.dumps(report.report.to_json()))
    rows = report.report.to_json()["images"]["visual_tokens_per_row"]
    assert f"visual tokens per row: mean {rows['mean']}, max {rows['max']}" in plan()


def test_the_llava_light_rule_reads_model_vision_image_processor_over_the_folder(tmp_path):
    """model.vision.image_processor's crop_size changes LLaVA's fixed count as it changes the processor's
    (rmspec.vision.processor.load_processor with the same settings: the independent count)."""
    from transformers import AutoTokenizer

    from rmspec.plan.vision import other_family_note
    from rmspec.vision.processor import load_processor
    from rmspec.vision.tokens import fixed_tokens_per_image

    model_dir = _family_dir(tmp_path, "llava")
    settings = {"crop_size": {"height": 56, "width": 56}, "size": {"shortest_edge": 56}}
    processor = load_processor(str(model_dir), AutoTokenizer.from_pretrained(model_dir), settings=settings)
    ids = processor(text=[IMAGE_TEXT["llava"]], images=[[_picture((90, 40), 0)]])["input_ids"][0]
    counted = list(ids).count(_image_token("llava"))
    assert counted != fixed_tokens_per_image(model_dir)  # the override matters
    assert fixed_tokens_per_image(model_dir, settings) == counted
    note = " ".join(other_family_note(str(model_dir), tmp_path / "data_report.json", 512, settings))
    assert f"visual tokens per image: {counted} " in note
