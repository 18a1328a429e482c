"""Where the tests find vLLM's own environment (its CPU build, .ci/install_vllm.sh): RMSPEC_VLLM_PYTHON, else
the python of RMSPEC_VLLM_VENV (default /opt/rmspec-vllm), as `--vllm-python` defaults do."""

from __future__ import annotations

import os
from pathlib import Path

VLLM_PYTHON = os.environ.get("RMSPEC_VLLM_PYTHON") or str(
    Path(os.environ.get("RMSPEC_VLLM_VENV", "/opt/rmspec-vllm")) / "bin" / "python"
)
