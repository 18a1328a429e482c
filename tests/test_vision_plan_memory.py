"""The plan sizes a VLM's images: visual tokens per row from the data's report (else the max_pixels
worst case, saying how to get the data's), the patches the vision tower encodes, and the tower's
activations in the memory estimate.

Independent computations: the Qwen2-VL image processor itself (image_grid_thw) for the tokens and
patches, and the tensors the vision tower's forward really keeps for backward, counted with
torch.autograd.graph.saved_tensors_hooks (distinct storages, parameters excluded) on tiny Qwen2-VL
and Qwen2.5-VL towers: the formula must land within 2% of the count (it is exact on these shapes).
"""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from helpers.runs import rmspec
from rmspec.vision.shapes import saved_bytes_per_patch, vision_shape
from rmspec.vision.tiny import build_tiny_vlm

SPEC = """version: 1
name: plan-vision
model:
  name_or_path: vlm
  vision: {{min_pixels: 784, max_pixels: 50176{freeze}}}
data:
  source: {{kind: files, paths: [train.jsonl]}}
  mapping: {{preset: pairs}}
approach: {{kind: bradley_terry}}
training: {{max_steps: 1, max_length: 512, global_batch_size: 4, micro_batch_size: 2, packing: {packing}}}
hardware: {{device: cpu}}
"""
SIZES = [[(300, 200)], [(64, 64), (112, 56)], [(40, 500)]]


# ---------------------------------------------------------------- the formula vs the tensors torch keeps


def _measured(model, pixels, grid, checkpointing=False, freeze=()):
    """Bytes of the distinct non-parameter storages the vision tower's forward saves for backward."""
    import torch

    visual = model.model.visual
    if checkpointing:
        model.gradient_checkpointing_enable()  # as rmspec's trainer does: the vision blocks are checkpointed too
        model.train()
    for name, p in visual.named_parameters():
        part = "projector" if name.startswith("merger") else "vision_tower"
        p.requires_grad_(part not in freeze)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(x):
        storage = x.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        visual(pixels, grid_thw=grid)
    return sum(seen.values())


def _qwen2(depth, width, ratio):
    from rmspec.vision.models import reward_class
    from rmspec.vision.tiny import build_tokenizer, tiny_config

    config = tiny_config(build_tokenizer(), vision_depth=depth, vision_width=width)
    config.vision_config.mlp_ratio = ratio
    return config, reward_class(config)(config)


def _qwen25(depth, width, mlp):
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    config = Qwen2_5_VLConfig(
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
            "depth": depth,
            "hidden_size": width,
            "intermediate_size": mlp,
            "num_heads": 2,
            "out_hidden_size": 64,
            "fullatt_block_indexes": [depth - 1],
            "window_size": 112,
        },
    )
    return config, Qwen2_5_VLForConditionalGeneration(config)


@pytest.mark.parametrize(
    "family, dims, dtype, checkpointing, freeze",
    [
        ("qwen2_vl", (2, 32, 2), "float32", False, ()),
        ("qwen2_vl", (3, 48, 4), "float32", False, ()),
        ("qwen2_vl", (2, 64, 2), "bfloat16", False, ()),
        ("qwen2_vl", (4, 32, 2), "float32", True, ()),
        ("qwen2_vl", (2, 32, 2), "float32", False, ("vision_tower",)),
        ("qwen2_vl", (2, 32, 2), "float32", False, ("projector",)),
        ("qwen2_vl", (2, 32, 2), "float32", False, ("vision_tower", "projector")),
        ("qwen2_5_vl", (2, 32, 48), "float32", False, ()),
        ("qwen2_5_vl", (4, 64, 96), "bfloat16", False, ()),
        ("qwen2_5_vl", (2, 32, 48), "float32", True, ()),
    ],
)
def test_saved_bytes_per_patch_match_the_tensors_torch_keeps(family, dims, dtype, checkpointing, freeze):
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config, model = (_qwen2 if family == "qwen2_vl" else _qwen25)(*dims)
    model = model.to(getattr(torch, dtype))
    v = vision_shape(config.to_dict())
    assert v is not None and v.rms_norm == (family == "qwen2_5_vl")
    grid = torch.tensor([[1, 8, 8], [1, 4, 12]])  # two images: 64 + 48 patches
    patches = int(grid.prod(dim=1).sum())
    pixels = torch.randn(patches, v.patch_input)
    measured = _measured(model, pixels, grid, checkpointing, freeze)
    element = 2 if dtype == "bfloat16" else 4
    trained = {"tower": "vision_tower" not in freeze, "projector": "projector" not in freeze}
    estimated = saved_bytes_per_patch(v, element, checkpointing=checkpointing, **trained) * patches
    if not trained["tower"] and not trained["projector"]:
        assert measured == estimated == 0
    else:
        assert estimated == pytest.approx(measured, rel=0.02), (measured, estimated)


@pytest.mark.parametrize("bounds", [(784, 50176), (784, 4096), (12544, 12544), (3136, 28 * 28 * 1280)])
def test_most_tokens_per_image_is_the_most_the_processors_rule_gives(bounds):
    """transformers' own smart_resize over every width up to 300 against heights at aspect ratios up to
    its limit of 200 (and huge images): none exceeds most_tokens, and one reaches it."""
    import math

    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    from rmspec.vision.tokens import VisualSettings

    low, high = bounds
    most = VisualSettings(14, 2, low, high).most_tokens()

    def tokens(width, height):
        h, w = smart_resize(height, width, 28, low, high)
        return (h // 14) * (w // 14) // 4

    sizes = [(w, h) for w in range(1, 301) for h in {w, 2 * w, 7 * w, 50 * w, 199 * w, 200 * w, w + 13}]
    sizes += [(w, math.floor(w * r)) for w in (10_000, 99_991) for r in (1, 1.5, 3.3, 60, 200)]
    sizes += [(28 * a, 28 * (high // (784 * a))) for a in range(1, 60) if high // (784 * a)]  # area just under max
    counts = [tokens(w, h) for w, h in sizes if max(w, h) / min(w, h) <= 200]
    assert max(counts) == most, (max(counts), most)


# ---------------------------------------------------------------- the plan


def _folder(tmp_path, freeze="", packing="off", rows=SIZES):
    build_tiny_vlm(tmp_path / "vlm")
    lines = []
    for k, sizes in enumerate(rows):
        names = []
        for j, size in enumerate(sizes):
            buffer = io.BytesIO()
            Image.new("RGB", size, (k * 40, j * 90, 10)).save(buffer, format="PNG")
            (tmp_path / f"{k}-{j}.png").write_bytes(buffer.getvalue())
            names.append(f"{k}-{j}.png")
        prompt = "<image>" * len(sizes) + f"question {k}"
        lines.append(json.dumps({"prompt": prompt, "chosen": "yes", "rejected": "no", "images": names}))
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "spec.yaml").write_text(SPEC.format(freeze=freeze, packing=packing))


def _plan(tmp_path) -> dict:
    out = rmspec("plan", "spec.yaml", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _processor_tokens(size) -> int:
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained("vlm", min_pixels=784, max_pixels=50176)
    grid = processor(Image.new("RGB", size, (1, 2, 3)))["image_grid_thw"][0].tolist()
    return grid[0] * grid[1] * grid[2] // processor.merge_size**2


def _write_report(tmp_path):
    """data_report.json as `rmspec run` writes it (the data stage with the run's tokenizer)."""
    from transformers import AutoTokenizer

    from rmspec.data import prepare
    from rmspec.spec import load_spec

    loaded = load_spec(tmp_path / "spec.yaml")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "vlm")
    report = prepare(loaded, tokenizer, cache_dir=tmp_path / "cache").report.to_json()
    (tmp_path / "runs" / "plan-vision").mkdir(parents=True)
    (tmp_path / "runs" / "plan-vision" / "data_report.json").write_text(json.dumps(report))


def test_without_a_data_report_the_plan_takes_max_pixels_and_says_how_to_get_the_datas(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path)
    plan = _plan(tmp_path)
    vision = plan["vision"]
    assert vision["tokens_from"] == "max_pixels"
    worst = vision["visual_tokens_per_row"]["max"]
    # a thin image goes past max_pixels' 64 tokens: the processor gives 107 for 50x9000
    assert worst >= _processor_tokens((50, 9000)) == 107 > 50176 // 28**2 == _processor_tokens((224, 224))
    assert worst == vision["visual_tokens_per_image"]["max"]
    assert "rmspec data report SPEC --json > runs/plan-vision/data_report.json" in vision["tokens_how"]
    # unpacked pairs: each side carries the row's images, so the tower encodes them twice per example
    assert vision["patches_per_example"] == 2 * worst * 4


def test_the_worst_case_never_passes_max_length(tmp_path, monkeypatch):
    """A row whose images need more than max_length is rejected by the data stage (test_vision_max_length),
    so the worst case the plan sizes is max_length, not max_pixels' count (16,384 for Qwen2-VL's default)."""
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path)
    (tmp_path / "spec.yaml").write_text(
        (tmp_path / "spec.yaml").read_text().replace("max_length: 512", "max_length: 100")
    )
    vision = _plan(tmp_path)["vision"]
    assert vision["visual_tokens_per_row"]["max"] == 100 < vision["visual_tokens_per_image"]["max"]
    assert "capped at max_length 100" in vision["tokens_how"]


def test_with_the_data_report_the_plan_sizes_the_datas_largest_row(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path)
    _write_report(tmp_path)
    plan = _plan(tmp_path)
    vision = plan["vision"]
    per_row = [sum(_processor_tokens(size) for size in sizes) for sizes in SIZES]
    assert vision["tokens_from"] == "data_report"
    assert vision["visual_tokens_per_row"]["max"] == max(per_row)
    assert vision["images_per_row"] == 2
    assert vision["patches_per_example"] == 2 * max(per_row) * 4
    # the activations the plan adds are the tower's formula over those patches, at the plan's micro batch
    v = vision_shape(json.loads((tmp_path / "vlm" / "config.json").read_text()))
    assert v is not None
    per_patch = saved_bytes_per_patch(v, 4)  # fp32 on this CPU plan
    expected = plan["micro_batch_size"] * vision["patches_per_example"] * per_patch / 1024**3
    assert vision["activations_gb"] == pytest.approx(expected, abs=6e-4)
    shown = rmspec("plan", "spec.yaml", cwd=tmp_path).stdout
    assert f"{max(per_row):,} visual tokens per row at most" in " ".join(shown.split())
    assert "of which the vision tower" in shown


def test_packed_pairs_encode_the_images_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path, packing="shared_prefix")
    worst = _plan(tmp_path)
    vision = worst["vision"]
    assert vision["patches_per_example"] == vision["visual_tokens_per_row"]["max"] * 4
    # the expected row (time) carries the images' mean visual tokens once, the unpacked pair twice
    _write_report(tmp_path)
    data = _plan(tmp_path)
    step = round(data["vision"]["visual_tokens_per_row"]["mean"]) - round(vision["visual_tokens_per_row"]["mean"])
    assert step != 0
    rows = [p["packing_tokens"]["row_tokens_expected"] for p in (data, worst)]
    pairs = [p["packing_tokens"]["pair_tokens_unpacked_expected"] for p in (data, worst)]
    assert rows[0] - rows[1] == step and pairs[0] - pairs[1] == 2 * step


def test_a_frozen_tower_keeps_no_activations_but_its_forward_still_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path, freeze=", freeze: [vision_tower, projector]")
    frozen = _plan(tmp_path)
    _folder(tmp_path, freeze=", freeze: [vision_tower]")
    tower = _plan(tmp_path)
    _folder(tmp_path)
    trained = _plan(tmp_path)
    assert frozen["vision"]["patches_per_example"] == trained["vision"]["patches_per_example"] > 0
    assert frozen["vision"]["activations_gb"] == 0
    assert 0 < tower["vision"]["activations_gb"] < trained["vision"]["activations_gb"]
    assert not frozen["vision"]["vision_tower_trained"] and not frozen["vision"]["projector_trained"]
    # frozen parts keep their weights but lose gradients and optimizer states: the model itself says how many
    model = _model_with_frozen(tmp_path / "vlm", ())
    for plan, names in ((frozen, ("vision_tower", "projector")), (tower, ("vision_tower",))):
        gone = sum(p.numel() for p in model.parameters()) - _trainable(tmp_path / "vlm", names)
        assert plan["vision"]["frozen_parameters"] == gone
        assert trained["model"]["trainable_parameters"] - plan["model"]["trainable_parameters"] == gone
        assert plan["model"]["trained_parameters"] == trained["model"]["trained_parameters"]
    # the vision share sits inside the activations the peak counts
    gap = trained["memory_per_device_gb"]["activations"] - frozen["memory_per_device_gb"]["activations"]
    assert gap == pytest.approx(trained["vision"]["activations_gb"], abs=2e-3)


def _model_with_frozen(folder, names):
    import torch

    from rmspec.vision.freeze import freeze
    from rmspec.vision.models import reward_class

    torch.set_num_threads(1)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    model = reward_class(config)(config)
    if names:
        freeze(model, names)
    return model


def _trainable(folder, names) -> int:
    return sum(p.numel() for p in _model_with_frozen(folder, names).parameters() if p.requires_grad)


def test_a_vlm_plan_imports_nothing_heavy(tmp_path):
    """The images' figures (processor settings, the data report, the tower's formula) stay light."""
    import subprocess
    import sys

    _folder(tmp_path)
    _write_report(tmp_path)
    code = (
        "import sys\n"
        "from rmspec.cli.main import cli\n"
        "cli.main(['plan', 'spec.yaml'], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate', 'PIL') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout and "visual tokens per row at most" in out.stdout
