"""training.liger_kernel: whether Liger's fused Triton kernels (RMSNorm, SwiGLU, RoPE; the
Trainer's `use_liger_kernel`) patch the model, decided by the plan with its reason.

Liger patches a model by its config's model_type, looked up in liger_kernel's
`MODEL_TYPE_TO_APPLY_LIGER_FN` (liger_kernel/transformers/monkey_patch.py); a type it does not list
is left as it is (Liger only logs it). The installed table is read here as text (ast), never
imported: liger_kernel imports torch and triton, and the plan stays light.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

from rmspec.errors import PlanError

TABLE = "MODEL_TYPE_TO_APPLY_LIGER_FN"


def installed_model_types() -> tuple[str, ...] | None:
    """The model types the installed liger_kernel patches; None when it is not installed, () when its
    table cannot be read (a layout this reader does not know: nothing is assumed supported)."""
    found = importlib.util.find_spec("liger_kernel")  # finds the package without running it
    if found is None or not found.submodule_search_locations:
        return None
    path = Path(list(found.submodule_search_locations)[0]) / "transformers" / "monkey_patch.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ()
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict)
            and any(isinstance(t, ast.Name) and t.id == TABLE for t in node.targets)
        ):
            return tuple(
                sorted(k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
            )
    return ()


def liger_decision(
    setting: str, *, is_gpu: bool, model_type: str, model_types: tuple[str, ...] | None
) -> dict[str, Any] | None:
    """{"enabled", "reason"} for the plan, or None for the default case that changes nothing (auto on
    CPU, or auto where liger_kernel is not installed): plan.json then has no liger_kernel key.
    `on` where it cannot apply is a PlanError saying what to write."""
    if setting == "off":
        return {"enabled": False, "reason": "training.liger_kernel: off"}
    why_not = None
    if not is_gpu:
        why_not = "Liger's kernels are Triton GPU kernels and this plan trains on CPU"
    elif model_types is None:
        why_not = "liger_kernel is not installed"
    elif model_type not in model_types:
        listed = ", ".join(model_types) if model_types else "none readable"
        why_not = f"the installed liger_kernel has no kernels for model type {model_type!r} (it patches: {listed})"
    if setting == "on":
        if why_not is not None:
            hint = (
                "pip install liger-kernel (on the GPU machine), or write training.liger_kernel: auto"
                if is_gpu and model_types is None
                else "write training.liger_kernel: auto (or off)"
            )
            raise PlanError(f"training.liger_kernel: on cannot apply: {why_not}", hint=hint)
        return {"enabled": True, "reason": f"training.liger_kernel: on (fused RMSNorm/SwiGLU/RoPE for {model_type})"}
    if not is_gpu or model_types is None:
        return None
    if why_not is not None:
        return {"enabled": False, "reason": f"auto: {why_not}"}
    return {
        "enabled": True,
        "reason": f"auto: liger_kernel is installed and patches model type {model_type} "
        "(fused RMSNorm/SwiGLU/RoPE; training.liger_kernel: off to train without)",
    }


def default_reason(uses_cpu: bool) -> str:
    """Why a plan without a liger_kernel entry trains without Liger (the two cases liger_decision omits)."""
    return (
        "auto: off on CPU (Triton GPU kernels)"
        if uses_cpu
        else "auto: off, liger_kernel was not installed where this plan was made"
    )
