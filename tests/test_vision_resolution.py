"""model.vision.image_processor (issue 37 item 2): a VLM family's own resolution settings (LLaVA's CLIP
``size`` / ``crop_size``, Idefics3's ``size`` / ``max_image_size``), passed wherever rmspec reads images,
checked against transformers' own processor built with those settings by hand:

1. the training collator's processor, and the data stage's measured count, make what that processor
   makes (pixel_values, image tokens), which differs from the checkpoint's defaults (the check can fail);
2. a 2-step ``rmspec run`` keeps the settings in RUN/model, and ``rmspec score RUN/model`` equals a plain
   forward on the hand-built processor's inputs (and not on the defaults');
3. ``rmspec plan`` refuses min_pixels on LLaVA and a setting the saved image processor lacks: exit 2 at
   the line, what to write instead, no traceback, no torch; a hub id not on disk defers the check to
   the run.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys

import pytest
import torch
from PIL import Image

from helpers.runs import rmspec
from helpers.tiny_families import FAMILIES, build_generation_checkpoint
from rmspec.vision.marks import PICTURE_ID

torch.set_num_threads(1)

#: Per family: settings that change the processor's output, and the image processor built with them by hand.
SETTINGS = {
    "llava": {"size": {"shortest_edge": 56}, "crop_size": {"height": 56, "width": 56}},
    "idefics3": {"size": {"longest_edge": 56}},
}


def hand_built(family: str) -> object:
    """transformers' processor as the tiny builder makes it, its image processor rebuilt with SETTINGS."""
    _, processor = FAMILIES[family]()
    if family == "llava":
        from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

        processor.image_processor = CLIPImageProcessorPil(
            size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56}
        )
    else:
        from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

        processor.image_processor = Idefics3ImageProcessorPil(
            size={"longest_edge": 56}, max_image_size={"longest_edge": 56}
        )
    return processor


@pytest.fixture(scope="module", params=sorted(SETTINGS))
def base(request, tmp_path_factory):
    family = request.param
    return family, build_generation_checkpoint(family, tmp_path_factory.mktemp(family) / "base")


def data_uri(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def test_the_collator_and_the_data_count_use_the_settings(base):
    from transformers import AutoConfig, AutoTokenizer

    from rmspec.spec.model import VisionSpec
    from rmspec.train.factory import vision_encoder
    from rmspec.vision.collate import VisionPairCollator
    from rmspec.vision.measured import MeasuredCount
    from rmspec.vision.processor import IMAGE_TEXT

    family, path = base
    tokenizer = AutoTokenizer.from_pretrained(path)
    config = AutoConfig.from_pretrained(path)

    class Model:  # what vision_encoder reads of the model: its config, named by its folder
        pass

    Model.config = config
    image = Image.new("RGB", (90, 40), (200, 30, 30))
    ids = [PICTURE_ID, *tokenizer("Which colour?Red", add_special_tokens=False)["input_ids"]]  # the data stage's
    row = {"chosen_input_ids": ids, "rejected_input_ids": ids, "images": [data_uri(image)]}

    def collated(vision):
        return VisionPairCollator(vision_encoder(Model, tokenizer, vision))([row])

    batch = collated(VisionSpec(image_processor=SETTINGS[family]))
    default = collated(VisionSpec())
    expected = hand_built(family)(text=["<image>Which colour?Red"], images=[[image]], return_tensors="pt")
    assert torch.equal(batch["pixel_values"][0], expected["pixel_values"][0])
    assert batch["input_ids"][0].tolist() == expected["input_ids"][0].tolist()
    assert batch["pixel_values"].shape != default["pixel_values"].shape  # the settings changed something
    image_id = config.image_token_id
    visual = int((expected["input_ids"][0] == image_id).sum())
    assert visual != int((default["input_ids"][0] == image_id).sum())

    measured = MeasuredCount(
        str(path), family, tokenizer, IMAGE_TEXT[family], image_token_id=image_id, image_processor=SETTINGS[family]
    )
    assert measured.image_tokens(data_uri(image)).visual == visual
    assert "crop_size" in repr(measured) or "longest_edge" in repr(measured)  # the data cache re-prepares


def test_an_unknown_setting_is_refused_by_the_loader_too(base):
    from transformers import AutoTokenizer

    from rmspec.vision.processor import load_processor

    _, path = base
    with pytest.raises(ValueError, match="image_processor.crop_sise.*has no setting"):
        load_processor(str(path), AutoTokenizer.from_pretrained(path), settings={"crop_sise": 3})


RUN_SPEC = """\
version: 1
name: res
model:
  name_or_path: base
  vision:
    image_processor: {settings}
data:
  source: {{kind: files, paths: [train.jsonl]}}
  mapping: {{preset: pairs}}
approach: {{kind: bradley_terry}}
training: {{max_steps: 2, learning_rate: 3.0e-3, global_batch_size: 4, max_length: 160, logging_steps: 1, seed: 0}}
eval: {{validation: false, benchmarks: []}}
hardware: {{device: cpu}}
"""


def test_a_run_keeps_the_settings_and_scores_with_them(tmp_path, monkeypatch):
    """Idefics3 at ``size: {longest_edge: 56}`` (one tile, no splitting): its tower takes 56 px tiles,
    so a run trains at that setting. (LLaVA's CLIP tower is fixed at its crop: checked in the collator.)"""
    from transformers import AutoConfig

    from rmspec.vision.demo import write_colour_pairs
    from rmspec.vision.models import reward_class

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    build_generation_checkpoint("idefics3", tmp_path / "base")
    write_colour_pairs(tmp_path, "train", 8, seed=1, size=100)
    (tmp_path / "spec.yaml").write_text(RUN_SPEC.format(settings=json.dumps(SETTINGS["idefics3"])))
    run = rmspec("run", "spec.yaml", cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    saved = tmp_path / "runs" / "res" / "model"
    kept = json.loads((saved / "processor_config.json").read_text())["image_processor"]
    assert kept["size"] == {"longest_edge": 56}

    picture = Image.new("RGB", (100, 60), (20, 20, 230))
    picture.save(tmp_path / "wide.png")
    rows = [{"prompt": "<image>Which colour? (blue)", "response": "Blue.", "images": ["wide.png"]}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scored = rmspec("score", str(saved), "rows.jsonl", "--out", "scored.jsonl", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr[-3000:]
    got = json.loads((tmp_path / "scored.jsonl").read_text().splitlines()[0])["reward"]

    model = reward_class(AutoConfig.from_pretrained(saved)).from_pretrained(saved).eval()
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Which colour? (blue)"}]},
        {"role": "assistant", "content": "Blue."},
    ]

    def reward(processor) -> float:
        text = processor.tokenizer.apply_chat_template(messages, tokenize=False)
        with torch.no_grad():
            inputs = processor(text=[text], images=[[picture]], return_tensors="pt")
            return model(**inputs).logits[0, 0].item()

    assert got == pytest.approx(reward(hand_built("idefics3")), abs=1e-5)
    assert abs(got - reward(FAMILIES["idefics3"]()[1])) > 1e-5  # the defaults (two tiles + global) differ


PLAN_SPEC = """\
version: 1
name: res
model:
  name_or_path: {name}
  vision:
{vision}
data:
  source: {{kind: files, paths: [train.jsonl]}}
  mapping: {{preset: pairs}}
approach: {{kind: bradley_terry}}
training: {{max_steps: 2, global_batch_size: 4, max_length: 160}}
hardware: {{device: cpu}}
"""

PLAN = (
    "import sys\n"
    "from rmspec.cli.main import main\n"
    "sys.argv = ['rmspec', 'plan', 'spec.yaml']\n"
    "try:\n    main()\n"
    "except SystemExit as exc:\n    code = exc.code\n"
    "heavy = [m for m in ('torch', 'transformers', 'PIL') if m in sys.modules]\n"
    "print('EXIT', code, 'HEAVY', heavy)\n"
)


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return build_generation_checkpoint("llava", tmp_path_factory.mktemp("llava") / "base")


@pytest.mark.parametrize(
    ("vision", "line", "said"),
    [
        (
            "    min_pixels: 3136\n",
            6,
            [
                "model.vision.min_pixels: CLIPImageProcessor (llava) does not resize by a pixel count",
                "remove model.vision.min_pixels and set this processor's own settings under "
                "model.vision.image_processor (its saved settings: crop_size, do_center_crop",
            ],
        ),
        (
            "    image_processor: {crop_size: {height: 28, width: 28}, crop_sise: 3}\n",
            6,
            [
                "model.vision.image_processor.crop_sise: CLIPImageProcessor (llava) has no setting 'crop_sise'",
                "use one of its saved settings: crop_size, do_center_crop",
            ],
        ),
    ],
)
def test_plan_refuses_what_the_image_processor_does_not_take(llava, tmp_path, vision, line, said):
    (tmp_path / "spec.yaml").write_text(PLAN_SPEC.format(name=llava, vision=vision.rstrip("\n")))
    (tmp_path / "train.jsonl").write_text("")
    out = subprocess.run([sys.executable, "-c", PLAN], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.stdout.rstrip().endswith("EXIT 2 HEAVY []"), out.stdout + out.stderr
    assert f"spec.yaml:{line}:" in out.stderr and "Traceback" not in out.stderr
    for text in said:
        assert text in out.stderr, out.stderr


def test_a_model_not_on_disk_defers_the_check_to_the_run(tmp_path):
    from rmspec.spec import load_spec
    from rmspec.vision.settings_check import check_vision

    (tmp_path / "spec.yaml").write_text(PLAN_SPEC.format(name="someone/not-here", vision="    min_pixels: 3136"))
    note = check_vision(load_spec(tmp_path / "spec.yaml"), download=False)
    assert note is not None and "checked when `rmspec run` starts" in note


def test_qwen_takes_pixel_bounds_but_not_a_size_the_token_rule_reads(tmp_path):
    """The Qwen2-VL family's bounds are its own settings; its ``size`` would change what the plan and the
    data stage's rule count (they read min_pixels / max_pixels), so it is refused with that fix."""
    from rmspec.spec.model import VisionSpec
    from rmspec.vision.settings_check import problems
    from rmspec.vision.tiny import build_processor

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}))
    build_processor().image_processor.save_pretrained(tmp_path)  # transformers' own saved Qwen2-VL settings
    assert list(problems(VisionSpec(min_pixels=3136, max_pixels=12544), tmp_path)) == []
    found = list(problems(VisionSpec(image_processor={"size": {"longest_edge": 12544}, "do_resize": True}), tmp_path))
    assert [path for path, _, _ in found] == [("model", "vision", "image_processor", "size")]
    assert "model.vision.min_pixels" in found[0][2]


def test_validate_refuses_image_settings_for_an_approach_that_reads_no_images(tmp_path):
    """bradley_terry with sft_weight trains on text only: model.vision.image_processor is refused at its line."""
    from rmspec.errors import SpecError
    from rmspec.spec import load_spec

    (tmp_path / "spec.yaml").write_text(
        PLAN_SPEC.format(name="base", vision="    image_processor: {crop_size: {height: 28, width: 28}}").replace(
            "approach: {kind: bradley_terry}", "approach: {kind: bradley_terry, sft_weight: 0.5}"
        )
    )
    with pytest.raises(SpecError) as refused:
        load_spec(tmp_path / "spec.yaml")
    (issue,) = refused.value.issues
    assert issue.path == "model.vision.image_processor" and issue.line == 6
    assert "remove model.vision.image_processor" in issue.hint


def test_run_refuses_before_the_run_directory(llava, tmp_path):
    (tmp_path / "spec.yaml").write_text(PLAN_SPEC.format(name=llava, vision="    max_pixels: 3136"))
    (tmp_path / "train.jsonl").write_text("")
    run = rmspec("run", "spec.yaml", cwd=tmp_path, timeout=300)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "spec.yaml:6:" in run.stderr and "model.vision.max_pixels: CLIPImageProcessor (llava)" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "runs").exists()
