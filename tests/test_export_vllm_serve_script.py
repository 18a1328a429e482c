"""serve.sh, run for real with a stand-in for vLLM's python that reports what it was given: the KV cache size
on vLLM's CPU build defaults to 1 GiB (vLLM's own default reserves 92% of the RAM and refuses to start when
that much is not free: bench/results/vllm_cpu_kv_cache.md), a user's value wins, and the command line is
vLLM's server module with the folder's pooler."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from rmspec.export.vllm import serve_script
from rmspec.export.vllm_hosting import Hosting, ReadRule

REPORTER = """#!/usr/bin/env python3
import json, os, sys
print(json.dumps({"kv": os.environ.get("VLLM_CPU_KVCACHE_SPACE"), "argv": sys.argv[1:]}))
"""


def _serve(tmp_path: Path, **env: str) -> dict:
    host = Hosting("Qwen2ForSequenceClassification", "chatml", 128, ReadRule("<|im_end|>\n"), -0.5, 2.0, True)
    (tmp_path / "serve.sh").write_text(serve_script(host))
    fake = tmp_path / "python"
    fake.write_text(REPORTER)
    fake.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    done = subprocess.run(
        ["bash", str(tmp_path / "serve.sh"), "--enforce-eager"],
        env={**base, "RMSPEC_VLLM_PYTHON": str(fake), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(done.stdout)


def test_serve_sh_gives_vllms_cpu_build_a_1_gib_kv_cache_unless_told(tmp_path):
    seen = _serve(tmp_path)
    assert seen["kv"] == "1"
    assert seen["argv"][:2] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert seen["argv"][seen["argv"].index("--max-model-len") + 1] == "128"
    assert json.loads(seen["argv"][seen["argv"].index("--pooler-config") + 1])["pooling_type"] == "LAST"
    assert seen["argv"][-1] == "--enforce-eager"  # the user's own flags come last, so they win
    assert _serve(tmp_path, VLLM_CPU_KVCACHE_SPACE="8")["kv"] == "8"
    normalized = _serve(tmp_path, RMSPEC_NORMALIZE="1")["argv"]
    pooler = json.loads(normalized[normalized.index("--pooler-config") + 1])
    assert (pooler["logit_mean"], pooler["logit_sigma"]) == (-0.5, 2.0)
