"""The plan counts the vision tower and projector of every family rmspec trains (issue 37 item 5).

Independent computation: the real model. Each tiny family (tests/helpers/tiny_families.py: LLaVA with a
CLIP tower, LLaVA-OneVision and Gemma 3 with SigLIP, Idefics3 and SmolVLM) is saved as a base folder
would hold it (config.json as transformers writes it, defaults left out), rmspec.vision.shapes counts
from that file alone, and the count must equal ``sum(p.numel())`` over the modules transformers builds
from the same config: the tower (``vision_tower`` / ``vision_model``), the projector
(``multi_modal_projector`` / ``connector``) and any other vision parameter of the base model (OneVision's
``image_newline``). Variants move the settings a real checkpoint changes (several feature layers, no
projector bias, SigLIP's pooling head, another pixel-shuffle factor, a deeper tower). The plan's
parameter count must hold the vision count on top of the language model's, and a frozen part must
leave the trainable count by exactly what rmspec.vision.freeze freezes on the real model.

The towers' activations (rmspec.vision.vit_shapes.vit_saved_bytes) are
checked against the tensors the tower's forward really keeps for backward, counted with
torch.autograd.graph.saved_tensors_hooks (distinct storages, parameters excluded), within 2%
(exact on these shapes).
"""

from __future__ import annotations

import json

import pytest

from helpers.runs import rmspec
from helpers.tiny_families import FAMILIES
from rmspec.plan.model_shape import shape_from_config
from rmspec.vision.shapes import loose_vision_parameters, vision_part_parameters, vision_tower_parameters
from rmspec.vision.vit_shapes import most_tiles_per_image, vit_saved_bytes, vit_shape

TOWERS = ("vision_tower", "vision_model")
PROJECTORS = ("multi_modal_projector", "connector")
LANGUAGE = ("language_model", "text_model")

# (family, a change to its config): the plain tiny family, then the settings real checkpoints move
CASES = [
    ("llava", {}),
    ("llava", {"vision_feature_layer": [-2, -1], "multimodal_projector_bias": False}),
    ("llava", {"vision_config": {"num_hidden_layers": 3, "image_size": 42}}),
    ("llava_onevision", {}),
    ("llava_onevision", {"vision_config": {"vision_use_head": True}}),
    ("gemma3", {}),
    ("gemma3", {"vision_config": {"vision_use_head": True, "intermediate_size": 48}}),
    ("idefics3", {}),
    ("idefics3", {"scale_factor": 4}),
    ("smolvlm", {}),
]


def _config(family, change):
    config, _ = FAMILIES[family]()
    for key, value in change.items():
        if key == "vision_config":
            for k, v in value.items():
                setattr(config.vision_config, k, v)
        else:
            setattr(config, key, value)
    return config


def _real_parts(config):
    """(tower, projector, other vision) parameters of the model transformers builds from ``config``."""
    import torch
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(0)
    base = AutoModelForImageTextToText.from_config(config).model
    children = dict(base.named_children())

    def count(names):
        return sum(p.numel() for name in names if name in children for p in children[name].parameters())

    known = {id(p) for name in TOWERS + PROJECTORS + LANGUAGE if name in children for p in children[name].parameters()}
    loose = sum(p.numel() for p in base.parameters() if id(p) not in known)
    return count(TOWERS), count(PROJECTORS), loose, base


def _saved(config, folder):
    config.save_pretrained(folder)
    return json.loads((folder / "config.json").read_text())


@pytest.mark.parametrize(("family", "change"), CASES, ids=lambda c: json.dumps(c) if isinstance(c, dict) else c)
def test_the_count_from_config_json_equals_the_real_modules(tmp_path, family, change):
    config = _config(family, change)
    tower, projector, loose, base = _real_parts(config)
    assert tower > 0 and projector > 0
    saved = _saved(config, tmp_path)
    assert vision_part_parameters(saved) == (tower, projector)
    assert loose_vision_parameters(saved) == loose
    assert vision_tower_parameters(saved) == tower + projector + loose
    # the parts are those model.vision.freeze freezes
    from rmspec.vision.freeze import parts

    found = parts(base)
    assert (sum(p.numel() for p in found["vision_tower"]), sum(p.numel() for p in found["projector"])) == (
        tower,
        projector,
    )


def test_a_family_not_counted_stays_none():
    """A VLM type the planner does not know keeps no vision count (the plan's note is absent, not wrong)."""
    config = {"model_type": "mllama", "vision_config": {"hidden_size": 32}, "text_config": {"hidden_size": 64}}
    assert vision_part_parameters(config) is None and vision_tower_parameters(config) is None


SPEC = """version: 1
name: plan-families
model:
  name_or_path: base
{vision}data:
  source: {{kind: files, paths: [train.jsonl]}}
  mapping: {{preset: pairs}}
approach: {{kind: bradley_terry}}
training: {{max_steps: 1, max_length: 256, global_batch_size: 4, micro_batch_size: 2}}
hardware: {{device: cpu}}
"""


def _plan(tmp_path, freeze=None, image_processor="") -> dict:
    vision = (
        f"  vision: {{freeze: [{', '.join(freeze or ())}]{image_processor}}}\n" if freeze or image_processor else ""
    )
    (tmp_path / "spec.yaml").write_text(SPEC.format(vision=vision))
    (tmp_path / "train.jsonl").write_text(json.dumps({"prompt": "p <image>", "chosen": "a", "rejected": "b"}) + "\n")
    out = rmspec("plan", "spec.yaml", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("family", ["llava", "llava_onevision", "idefics3"])
def test_the_plan_counts_the_vision_parameters_and_frozen_parts(tmp_path, family):
    config, processor = FAMILIES[family]()
    folder = tmp_path / "base"
    saved = _saved(config, folder)
    processor.save_pretrained(folder)
    tower, projector, loose, _ = _real_parts(config)
    text_only = shape_from_config({**saved["text_config"]}, "text").num_parameters  # the language model alone

    trained = _plan(tmp_path)
    assert trained["model"]["num_parameters"] - text_only == tower + projector + loose
    notes = "\n".join(trained["notes"])
    assert f"vision tower and projector: {tower + projector + loose:,} parameters" in notes
    assert "its activations on the plan's vision tower line" in notes

    frozen = _plan(tmp_path, ["vision_tower"])
    assert trained["model"]["trainable_parameters"] - frozen["model"]["trainable_parameters"] == tower
    both = _plan(tmp_path, ["vision_tower", "projector"])
    assert trained["model"]["trainable_parameters"] - both["model"]["trainable_parameters"] == tower + projector


def _saved_by_forward(tower, pixels, params) -> int:
    import torch

    seen: dict[int, int] = {}

    def pack(x):
        storage = x.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = tower(pixels)
    assert out.last_hidden_state.requires_grad
    return sum(seen.values())


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize(
    ("depth", "images", "dtype", "checkpointing"),
    [(1, 1, "float32", False), (2, 3, "float32", False), (3, 2, "bfloat16", False), (3, 2, "float32", True)],
)
def test_the_towers_saved_bytes_match_the_tensors_torch_keeps(tmp_path, family, depth, images, dtype, checkpointing):
    import torch
    from transformers import AutoModelForImageTextToText

    config = _config(
        family, {"vision_config": {"num_hidden_layers": depth, "hidden_size": 48, "num_attention_heads": 3}}
    )
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(config).to(getattr(torch, dtype))
    if checkpointing:  # as rmspec's trainer does: the tower's blocks are checkpointed too
        model.gradient_checkpointing_enable()
        model.train()
    tower = next(getattr(model.model, name) for name in TOWERS if hasattr(model.model, name))
    size = config.vision_config.image_size
    pixels = torch.randn(images, 3, size, size, dtype=getattr(torch, dtype))
    measured = _saved_by_forward(tower, pixels, {p.untyped_storage().data_ptr() for p in model.parameters()})
    v = vit_shape(_saved(config, tmp_path))
    assert v is not None
    formula = vit_saved_bytes(v, images, torch.finfo(getattr(torch, dtype)).bits // 8, checkpointing)
    assert formula == pytest.approx(measured, rel=0.02)


TILE_CASES = [
    *((family, {}) for family in FAMILIES),
    ("idefics3", {"size": {"longest_edge": 168}}),
    ("smolvlm", {"do_image_splitting": False}),
    ("llava_onevision", {"image_grid_pinpoints": [[28, 28], [28, 84], [84, 28]]}),
]
PICTURES = [(28, 28), (56, 56), (200, 200), (300, 40), (40, 300), (57, 113), (10, 10), (90, 30)]


@pytest.mark.parametrize(("family", "change"), TILE_CASES, ids=lambda c: json.dumps(c) if isinstance(c, dict) else c)
def test_most_tiles_per_image_is_the_most_the_processor_makes(family, change):
    """The image processor itself, fed pictures of many shapes: every picture becomes at most the bound
    of fixed-size images for the tower, and some picture reaches it."""
    from PIL import Image

    _, processor = FAMILIES[family]()
    image_processor = processor.image_processor
    for key, value in change.items():
        setattr(image_processor, key, value)
    nested = family in ("idefics3", "smolvlm")  # these take one list of images per row

    def tiles(size):
        picture = Image.new("RGB", size)
        pixels = image_processor(images=[[picture]] if nested else [picture], return_tensors="pt")["pixel_values"]
        return pixels.shape[1] if pixels.ndim == 5 else pixels.shape[0]

    bound = most_tiles_per_image(family, json.loads(image_processor.to_json_string()))
    assert max(tiles(size) for size in PICTURES) == bound


BIG_TOWER = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "image_size": 224}


@pytest.mark.parametrize(
    ("family", "tiles", "report"),
    [("llava", 1, None), ("idefics3", 5, 3), ("gemma3", 1, 2), ("smolvlm", 5, None), ("llava_onevision", 5, 1)],
)
def test_the_plan_sizes_the_towers_activations(tmp_path, family, tiles, report):
    """The memory estimate holds the tower's saved bytes (vit_saved_bytes, checked above against torch)
    for micro batch x 2 sequences (unpacked pair) x pictures per row (the data report's, else 1) x the
    tiles each picture becomes (checked above against the processor); a frozen tower adds nothing."""
    import re

    from rmspec.vision.vit_shapes import vit_saved_bytes, vit_shape

    config, processor = FAMILIES[family]()
    for key, value in BIG_TOWER.items():  # a tower large enough to show in GB; the plan reads config.json only
        setattr(config.vision_config, key, value)
    saved = _saved(config, tmp_path / "base")
    processor.save_pretrained(tmp_path / "base")
    if report:
        (tmp_path / "runs" / "plan-families").mkdir(parents=True)
        images = {"images_per_row": {"max": report, "mean": 1.0}}
        (tmp_path / "runs" / "plan-families" / "data_report.json").write_text(json.dumps({"images": images}))
    plan = _plan(tmp_path)
    line = next(w for w in plan["notes"] if w.startswith("vision tower: "))
    sequences = plan["sequences_per_example"]
    assert sequences == 2  # Bradley-Terry pairs of these families train unpacked
    per_example = tiles * (report or 1) * sequences
    assert line.startswith(f"vision tower: {per_example} tower-size images per example ({tiles} per picture")
    shown = float(re.search(r"([0-9.]+) GB of activations", line).group(1))
    v = vit_shape(saved)
    assert v is not None
    expected = plan["micro_batch_size"] * vit_saved_bytes(v, per_example, 4) / 1024**3  # fp32 on this CPU plan
    assert expected > 0.01 and shown == pytest.approx(expected, abs=0.0006)

    frozen = _plan(tmp_path, ["vision_tower"])
    assert any("vision tower frozen" in w for w in frozen["notes"])
    gone = plan["memory_per_device_gb"]["activations"] - frozen["memory_per_device_gb"]["activations"]
    if plan["micro_batch_size"] == frozen["micro_batch_size"]:
        assert gone == pytest.approx(expected, abs=0.002)


def test_the_tiles_follow_model_vision_image_processor(tmp_path):
    """model.vision.image_processor replaces the folder's settings, as the processor loads them: Idefics3
    split to 168 px instead of 112 makes 3x3 tiles plus the global view per picture, not 2x2 + 1."""
    config, processor = FAMILIES["idefics3"]()
    _saved(config, tmp_path / "base")
    processor.save_pretrained(tmp_path / "base")
    folder = next(w for w in _plan(tmp_path)["notes"] if w.startswith("vision tower: "))
    bigger = _plan(tmp_path, image_processor=", image_processor: {size: {longest_edge: 168}}")
    line = next(w for w in bigger["notes"] if w.startswith("vision tower: "))
    assert "(5 per picture" in folder and line.startswith(
        "vision tower: 20 tower-size images per example (10 per picture"
    )
