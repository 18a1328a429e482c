"""Checks before a launch: mistakes a user can fix, caught before any process starts.

A plan compiled for 8 x H100 must not start 8 CPU processes on a laptop, and a hub model that
cannot be fetched offline must not fail minutes later inside the children. Light: no torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.plan import Plan
from rmspec.plan.hardware import HostFacts, detect_host
from rmspec.plan.plan import as_plan
from rmspec.plan.shape_source import hf_cache_config

OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def _offline(env) -> bool:
    return any(env.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in OFFLINE_VARS)


def check_devices(plan: Plan | Mapping[str, Any], host: HostFacts) -> None:
    hw = as_plan(plan).hardware
    if not hw.is_gpu:
        return
    need, have = hw.gpus_per_node, len(host.gpus)
    if have >= need:
        return
    found = "no GPU (nvidia-smi found none)" if have == 0 else f"{have} GPU(s): {', '.join(n for n, _ in host.gpus)}"
    raise RmspecError(
        f"this plan trains on {need} x {hw.label} per node, but this machine has {found}",
        hint="run it where those GPUs are (`rmspec run plan.json` there), or plan for this machine: "
        f"--set hardware.device=auto --set hardware.gpus_per_node={max(have, 1)}",
    )


def check_model(plan: Plan | Mapping[str, Any], env) -> None:
    plan = as_plan(plan)
    path = plan.model_path
    if plan.weights is not None:  # a GGUF file, dequantised into model_path when the run starts
        if not Path(plan.weights["file"]).is_file():
            raise RmspecError(
                f"model: the GGUF file {plan.weights['file']} of this plan is not on this machine",
                hint="copy the file to that path here, or plan again where it is: `rmspec plan SPEC`",
            )
        return
    if Path(path).is_dir() or not _offline(env) or hf_cache_config(path) is not None:
        return
    raise RmspecError(
        f"model {path!r} is not available offline: it is not a local folder, not a packaged model, "
        "and not in the Hugging Face cache, while HF_HUB_OFFLINE is set",
        hint="run once with the hub reachable (it is cached), point model.name_or_path at a local copy, "
        "or try the packaged model: --set model.name_or_path=sentence-transformers/all-MiniLM-L6-v2",
    )


def preflight(plan: Plan | Mapping[str, Any], host: HostFacts | None = None, env=None) -> None:
    """Raise RmspecError (exit 2) when this machine cannot run the plan as it stands."""
    plan = as_plan(plan)
    check_devices(plan, host or detect_host())
    check_model(plan, os.environ if env is None else env)
