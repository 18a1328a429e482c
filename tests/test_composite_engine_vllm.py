"""A composite's `kind: model` component on vLLM (`engine: vllm`, issue 48 item 2): scored through the code
`rmspec serve --engine vllm` starts its engine with (rmspec.inference.engine_base.start_engine ->
rmspec.export.vllm_engine.start).

Validate refuses what is not built (device or dtype with engine: vllm: vLLM's environment picks them;
vllm_python without engine: vllm; an unknown engine lists the choices). Without vLLM: a component naming a
missing environment, and one naming an environment without vLLM (its engine exits at once), stop `rmspec
score` with exit 2 naming the component. With vLLM (ONE engine start): the component's values and the
composite's reward equal `rmspec score` of the model alone (torch, float32) within 1e-4.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

torch = need("torch")
transformers = need("transformers")

from helpers.composite import write_composite_run  # noqa: E402
from helpers.serve_models import build_llama3  # noqa: E402
from helpers.serve_process import REPO  # noqa: E402
from rmspec.spec.composite import Composite  # noqa: E402

pytestmark = pytest.mark.slow
ROWS = [
    ([{"role": "user", "content": "What colour is the sky?"}], "Blue, on a clear day."),
    ([{"role": "user", "content": "Add 2 and 2."}], "4"),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], "hello"),
]


def rmspec(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def section(model: Path, **options) -> dict:
    return {
        "kind": "composite",
        "components": [{"name": "rm", "kind": "model", "path": str(model), "weight": 0.5, **options}],
        "on_failure": "error",
    }


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_llama3(tmp_path_factory.mktemp("llama3") / "model", hidden_size=128, intermediate_size=256)


@pytest.fixture(scope="module")
def rows(model: Path) -> Path:
    path = model.parent / "rows.jsonl"
    path.write_text("".join(json.dumps({"prompt": m, "response": r, "label": None}) + "\n" for m, r in ROWS))
    return path


def scored(run: Path, rows: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    done = rmspec("score", str(run), str(rows), "--out", str(out))
    lines = [json.loads(x) for x in out.read_text().splitlines()] if done.returncode == 0 else []
    return done, lines


# ---------------------------------------------------------------------- validate: what is not built is refused


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"engine": "vllm", "device": "cpu"}, "device and dtype are torch settings"),
        ({"engine": "vllm", "dtype": "bfloat16"}, "device and dtype are torch settings"),
        ({"vllm_python": "/opt/rmspec-vllm/bin/python"}, "vllm_python is for engine: vllm"),
        ({"engine": "sglang"}, "'torch' or 'vllm'"),
    ],
)
def test_validate_refuses_what_the_vllm_engine_does_not_do(tmp_path: Path, options: dict, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        Composite.model_validate(section(tmp_path, **options))
    ok = Composite.model_validate(section(tmp_path, engine="vllm", vllm_python="/x/python", batch_size=8))
    assert ok.components[0].engine == "vllm"
    assert ok.components[0].plan_costs(tmp_path)["device"] == "vllm"  # `rmspec plan` says where it runs


# ---------------------------------------------------------------------- without vLLM: refused at start, exit 2


def test_a_missing_or_broken_vllm_environment_is_exit_2_naming_the_component(
    model: Path, rows: Path, tmp_path: Path
) -> None:
    run = write_composite_run(
        tmp_path / "nowhere", section(model, engine="vllm", vllm_python=str(tmp_path / "no" / "python"))
    )
    done, _ = scored(run, rows, tmp_path / "a.jsonl")
    assert done.returncode == 2, done.stderr
    assert "component rm (engine: vllm): no vLLM environment" in done.stderr and "Traceback" not in done.stderr
    # rmspec's own venv has no vLLM: the engine really starts (the serve engine's code) and exits at once
    run = write_composite_run(tmp_path / "broken", section(model, engine="vllm", vllm_python=sys.executable))
    done, _ = scored(run, rows, tmp_path / "b.jsonl")
    assert done.returncode == 2, done.stderr
    assert "component rm (engine: vllm): the vLLM environment" in done.stderr and "is broken" in done.stderr


# ---------------------------------------------------------------------- the real vLLM engine (one start)


def test_a_model_component_on_vllm_gives_rmspec_scores_reward(model: Path, rows: Path, tmp_path: Path) -> None:
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")
    done, alone = scored(model, rows, tmp_path / "alone.jsonl")  # the model by itself, torch
    assert done.returncode == 0, done.stderr[-2000:]
    run = write_composite_run(tmp_path / "composite", section(model, engine="vllm", vllm_python=VLLM_PYTHON))
    done, got = scored(run, rows, tmp_path / "composite.jsonl")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "component rm: engine vllm (LlamaForSequenceClassification, float32" in done.stderr
    assert len(got) == len(ROWS)
    for a, g in zip(alone, got):
        assert abs(g["rm"] - a["reward"]) <= 1e-4
        assert abs(g["reward"] - 0.5 * a["reward"]) <= 1e-4
    assert max(a["reward"] for a in alone) - min(a["reward"] for a in alone) > 0.05  # the rows score differently
