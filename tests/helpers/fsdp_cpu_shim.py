"""TEST-ONLY SHIM: let accelerate take its FSDP path on CPU processes (gloo), so that rmspec's FSDP2
plans execute in CI without a GPU. Never imported by rmspec/ (it lives under tests/ only).

Why it is needed: accelerate 1.15 switches `distributed_type` to FSDP only in the GPU-like branch of
`AcceleratorState.__init__` (MULTI_GPU, MULTI_XPU, ...). CPU processes get MULTI_CPU, the FSDP plugin
is dropped, and the Trainer wraps the model in DDP, with no warning. This shim re-does that one switch
after the original `__init__` (device cpu and backend gloo are kept), the rest of accelerate and
transformers run unchanged: fully_shard, the Trainer's FSDP2 save/load, accelerate's checkpointing.

One CPU-only difference, stated: with fsdp_offload_params the plugin's `CPUOffloadPolicy()` pins
memory, which needs an accelerator; the shim gives it `CPUOffloadPolicy(pin_memory=False)`. Pinned
memory is therefore NOT exercised on CPU.

How a child takes it: `child_env()` puts tests/helpers/fsdp_cpu_shim_site (a sitecustomize) first on
PYTHONPATH and sets RMSPEC_TEST_FSDP_CPU_SHIM=1; every Python process `accelerate launch` starts then
installs the shim before rmspec's entrypoint runs. The same sitecustomize installs the recorder
(RMSPEC_TEST_FSDP_RECORD=DIR, see fsdp_recorder.py) that the tests read their facts from.

It fails loudly (ShimBroken at import in the child, so the run fails) when the accelerate internals
it relies on are not what it was written against.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

ENV = "RMSPEC_TEST_FSDP_CPU_SHIM"
RECORD_ENV = "RMSPEC_TEST_FSDP_RECORD"
SITE = Path(__file__).parent / "fsdp_cpu_shim_site"
# What the shim was written against (accelerate/state.py, AcceleratorState.__init__).
EXPECTED_PARAMETERS = ("self", "mixed_precision", "cpu", "dynamo_plugin", "deepspeed_plugin", "fsdp_plugin")
GPU_BRANCH_MARK = "self.distributed_type = DistributedType.FSDP"


class ShimBroken(RuntimeError):
    """accelerate changed under the shim: fix the shim before trusting an FSDP-on-CPU test."""


def child_env(record_dir: Path | None = None, *, shim: bool = True) -> dict[str, str]:
    """Environment for `rmspec run` whose launched children take the shim (and the recorder)."""
    env = {"PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    if shim:
        env[ENV] = "1"
    if record_dir is not None:
        env[RECORD_ENV] = str(record_dir)
    return env


def _check_accelerate(state_module) -> None:
    init = state_module.AcceleratorState.__init__
    names = tuple(inspect.signature(init).parameters)[: len(EXPECTED_PARAMETERS)]
    if names != EXPECTED_PARAMETERS:
        raise ShimBroken(f"AcceleratorState.__init__ parameters are {names}, the shim expects {EXPECTED_PARAMETERS}")
    source = inspect.getsource(init)
    if GPU_BRANCH_MARK not in source or "DistributedType.MULTI_GPU" not in source:
        raise ShimBroken("AcceleratorState.__init__ no longer switches to FSDP in its GPU branch as the shim expects")
    for name in ("FSDP", "MULTI_CPU"):
        if not hasattr(state_module.DistributedType, name):
            raise ShimBroken(f"accelerate's DistributedType has no {name}")
    for cls in (state_module.AcceleratorState, state_module.PartialState):
        if not isinstance(getattr(cls, "_shared_state", None), dict):
            raise ShimBroken(f"{cls.__name__}._shared_state is not the dict the shim updates")


def install() -> None:
    """Patch AcceleratorState.__init__ (idempotent)."""
    import accelerate.state as state_module

    if getattr(state_module.AcceleratorState.__init__, "_rmspec_test_shim", False):
        return
    _check_accelerate(state_module)
    original = state_module.AcceleratorState.__init__
    distributed = state_module.DistributedType

    def init(self, mixed_precision=None, cpu=False, dynamo_plugin=None, deepspeed_plugin=None, fsdp_plugin=None, **kw):
        fresh = not state_module.AcceleratorState._shared_state
        original(self, mixed_precision, cpu, dynamo_plugin, deepspeed_plugin, fsdp_plugin, **kw)
        if not fresh or fsdp_plugin is None or self.distributed_type != distributed.MULTI_CPU:
            return
        # What the GPU branch does (state.py), on CPU: FSDP with the plugin and its mixed precision.
        if fsdp_plugin.fsdp_version == 2 and _offloads(fsdp_plugin):
            from torch.distributed.fsdp import CPUOffloadPolicy

            fsdp_plugin.cpu_offload = CPUOffloadPolicy(pin_memory=False)  # pinning needs an accelerator
        self.distributed_type = distributed.FSDP
        if self._mixed_precision != "no":
            fsdp_plugin.set_mixed_precision(self._mixed_precision)
        self.fsdp_plugin = fsdp_plugin
        state_module.PartialState._shared_state["distributed_type"] = distributed.FSDP

    init._rmspec_test_shim = True  # type: ignore[attr-defined]
    state_module.AcceleratorState.__init__ = init


def _offloads(plugin) -> bool:
    from torch.distributed.fsdp import CPUOffloadPolicy

    return isinstance(plugin.cpu_offload, CPUOffloadPolicy)
