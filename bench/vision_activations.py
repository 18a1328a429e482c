"""The planner's vision-tower activations (rmspec.vision.shapes.saved_bytes_per_patch) against what
PyTorch keeps, at the real widths of Qwen2-VL-2B/7B's and Qwen2.5-VL-7B's vision towers (depth cut
to fit a CPU; the formula is per block, so depth only multiplies it).

Two measurements per row, both on real tensors (CPU, random init, one 448x448 image = 1,024 patches):
- saved: distinct non-parameter storages the forward hands autograd (torch.autograd.graph.saved_tensors_hooks);
- tracked: PyTorch's MemTracker, activation bytes alive when the forward ends (what backward reads, plus
  the outputs), a second independent reading.

Run: OMP_NUM_THREADS=1 .venv/bin/python bench/vision_activations.py  (writes bench/results/vision_activations.md)
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import torch

from rmspec.vision.shapes import block_bytes_per_patch, saved_bytes_per_patch, vision_shape

TOWERS = {
    # vision_config of the released checkpoints (config.json), depth cut to 2 / 4
    "Qwen2-VL-7B vision (embed 1280, mlp x4, 16 heads)": (
        "qwen2_vl",
        {"embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "hidden_size": 3584, "in_channels": 3},
    ),
    "Qwen2.5-VL-7B vision (hidden 1280, mlp 3420, 16 heads)": (
        "qwen2_5_vl",
        {"hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "out_hidden_size": 3584, "window_size": 112},
    ),
}


def build(model_type: str, vision: dict, depth: int):
    common = {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "depth": depth}
    if model_type == "qwen2_vl":
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

        config = Qwen2VLVisionConfig(**vision, **common)
        tower = Qwen2VisionTransformerPretrainedModel._from_config(config)
    else:
        from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

        config = Qwen2_5_VLVisionConfig(**vision, **common, fullatt_block_indexes=[depth - 1])
        tower = Qwen2_5_VisionTransformerPretrainedModel._from_config(config)
    shape = vision_shape({"model_type": model_type, "vision_config": {**vision, **common}})
    return tower, shape


def saved(tower, pixels, grid) -> int:
    params = {p.untyped_storage().data_ptr() for p in tower.parameters()}
    seen: dict[int, int] = {}

    def pack(x):
        storage = x.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        tower(pixels, grid_thw=grid)
    return sum(seen.values())


def tracked(tower, pixels, grid) -> int:
    """Activation bytes MemTracker sees alive once the forward is done (what backward will read)."""
    from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType

    tracker = MemTracker()
    tracker.track_external(tower, pixels)
    with tracker:
        out = tower(pixels, grid_thw=grid)
        now = tracker.get_tracker_snapshot()
        loss = out.pooler_output.float().pow(2).mean()
        loss.backward()
    device = next(iter(now))
    return int(now[device].get(_MemRefType.ACT, 0))


def main() -> None:
    torch.manual_seed(0)
    grid = torch.tensor([[1, 32, 32]])
    patches = int(grid.prod())
    rows = []
    for name, (model_type, vision) in TOWERS.items():
        for depth in (2, 4):
            for dtype in (torch.float32, torch.bfloat16):
                tower, shape = build(model_type, vision, depth)
                tower = tower.to(dtype).train()
                element = 2 if dtype == torch.bfloat16 else 4
                pixels = torch.randn(patches, shape.patch_input)
                t0 = time.time()
                got = saved(tower, pixels, grid)
                track = tracked(tower, pixels, grid)
                formula = saved_bytes_per_patch(shape, element) * patches
                rows.append((name, depth, str(dtype).removeprefix("torch."), got, track, formula, time.time() - t0))
                print(rows[-1], flush=True)
                del tower
    lines = [
        "# Vision-tower activations: planner formula vs PyTorch",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared, load "
        f"{os.getloadavg()[0]:.1f}); torch {torch.__version__}; one 448x448 image = {patches:,} patches; seed 0; "
        "random weights (the figures depend on shapes only). Command: "
        "`OMP_NUM_THREADS=1 .venv/bin/python bench/vision_activations.py`.",
        "",
        "saved: distinct non-parameter storages handed to autograd (saved_tensors_hooks); tracked: MemTracker's "
        "activation bytes alive when the forward ends; formula: rmspec.vision.shapes.saved_bytes_per_patch x patches.",
        "",
        "| tower | depth | dtype | saved MiB | tracked MiB | formula MiB | formula / saved | formula / tracked |",
        "|---|---|---|---|---|---|---|---|",
    ]
    mib = 1024**2
    for name, depth, dtype, got, track, formula, _ in rows:
        ratio_t = f"{formula / track:.3f}" if track else "n/a"
        lines.append(
            f"| {name} | {depth} | {dtype} | {got / mib:.2f} | {track / mib:.2f} | {formula / mib:.2f} | "
            f"{formula / got:.3f} | {ratio_t} |"
        )
    per_block = block_bytes_per_patch(build(*TOWERS[next(iter(TOWERS))], 1)[1], 2) * patches / mib
    lines += [
        "",
        f"One Qwen2-VL-7B vision block in bf16 keeps {per_block:.1f} MiB per 1,024 patches (x 32 blocks in the real tower).",
    ]
    out = Path(__file__).parent / "results" / "vision_activations.md"
    out.write_text("\n".join(lines) + "\n")
    print(out)


if __name__ == "__main__":
    main()
