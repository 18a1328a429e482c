"""TEST-ONLY: what the ranks of a launched run held, written for the FSDP tests to compare.

Installed in the launched children by tests/helpers/fsdp_cpu_shim_site (RMSPEC_TEST_FSDP_RECORD=DIR):
every Trainer gets a callback that writes, into DIR,
- rank{R}_params.json at train begin: per parameter, whether it is a DTensor, its placements, mesh
  size and shape, local and global shape (what this rank holds);
- grads_step1.pt (rank 0): the full gradient of every trainable parameter before the first
  optimizer step (DTensor shards gathered with full_tensor(), a collective every rank joins);
- final.pt (rank 0): the full trainable parameters at train end, and the logits of a fixed input
  computed by the (sharded) model on every rank.
"""

from __future__ import annotations

import json
from pathlib import Path

PROBE_IDS = [[5, 9, 14, 20, 7, 33, 3], [11, 4, 8, 3, 3, 3, 3]]
PROBE_MASK = [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]]


def _full(tensor):
    from torch.distributed.tensor import DTensor

    return (tensor.full_tensor() if isinstance(tensor, DTensor) else tensor).detach().float().cpu().clone()


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def make_callback(out: Path):
    import torch
    from torch.distributed.tensor import DTensor
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):
        def __init__(self):
            self.grads_done = False

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            facts = {}
            for name, param in model.named_parameters():
                sharded = isinstance(param, DTensor)
                facts[name] = {
                    "dtensor": sharded,
                    "placements": [str(p) for p in param.placements] if sharded else [],
                    "mesh_size": param.device_mesh.size() if sharded else 1,
                    "mesh_shape": list(param.device_mesh.shape) if sharded else [],
                    "local_shape": list(param.to_local().shape) if sharded else list(param.shape),
                    "global_shape": list(param.shape),
                    "requires_grad": param.requires_grad,
                }
            (out / f"rank{_rank()}_params.json").write_text(json.dumps(facts, indent=1))

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            if self.grads_done or state.global_step != 0 or model is None:
                return
            self.grads_done = True
            grads = {n: _full(p.grad) for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}
            if _rank() == 0:
                torch.save(grads, out / "grads_step1.pt")

        def on_train_end(self, args, state, control, model=None, **kwargs):
            params = {n: _full(p) for n, p in model.named_parameters() if p.requires_grad}
            device = next(model.parameters()).device
            with torch.no_grad():
                logits = model(
                    input_ids=torch.tensor(PROBE_IDS, device=device),
                    attention_mask=torch.tensor(PROBE_MASK, device=device),
                ).logits
            if _rank() == 0:
                torch.save({"params": params, "logits": _full(logits)}, out / "final.pt")

    return Recorder()


def install(directory: str) -> None:
    """Every Trainer built in this process records into ``directory``."""
    import transformers

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    original = transformers.Trainer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.add_callback(make_callback(out))

    transformers.Trainer.__init__ = init
