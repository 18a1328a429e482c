"""The prompt-once mask costs one tensor, not one per layer: rmspec hands the model one float mask
(prefix_mask.additive_mask) that every layer reads. Handed a bool mask, SDPA makes a float copy in every
layer and saves it for backward (bench/results/prefix_mask_memory.md: 2,137 against 1,234 MiB at 8,192
tokens). Counted here by the tensors autograd saves during a forward of a 4-layer Llama on a packed row."""

from __future__ import annotations

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from rmspec.inference.packed_forward import packed_head_outputs  # noqa: E402
from rmspec.inference.prefix_mask import Group, model_masks, pack_groups  # noqa: E402


def _model(layers: int = 4):
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=0,
        num_labels=1,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    return transformers.LlamaForSequenceClassification(config)


def test_every_layer_reads_one_saved_mask():
    model = _model()
    rows = pack_groups([Group(list(range(1, 41)), [list(range(41, 51)), list(range(51, 63))])], 0)
    width = rows.input_ids.shape[1]
    masks = model_masks(model.config, rows, torch.float32)
    assert masks.dtype == torch.float32 and set(masks.unique().tolist()) == {0.0, torch.finfo(torch.float32).min}
    storages: set[int] = set()

    def keep(saved: torch.Tensor) -> torch.Tensor:
        if saved.dim() == 4 and tuple(saved.shape[-2:]) == (width, width):
            storages.add(saved.untyped_storage().data_ptr())
        return saved

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda saved: saved):
        scores = packed_head_outputs(model, rows)[:, 0]
    assert len(storages) == 1, f"{len(storages)} row x row masks saved for backward, one per layer"
    # the same rewards a bool mask gives: the float mask changes the memory, not the attention
    import rmspec.inference.prefix_mask as prefix_mask

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prefix_mask, "additive_mask", lambda ok, dtype: ok)
        as_bool = packed_head_outputs(model, rows)[:, 0]
    assert torch.allclose(scores, as_bool, atol=1e-6), (scores, as_bool)


def test_under_autocast_the_mask_takes_the_compute_dtype():
    """Mixed precision (fp32 weights, bf16 compute): the mask is made in bf16, the queries' dtype, so SDPA does
    not convert it per layer either; the rewards are the bool mask's under the same autocast."""
    from rmspec.inference.packed_forward import compute_dtype

    model = _model(layers=2)
    rows = pack_groups([Group(list(range(1, 21)), [list(range(21, 27)), list(range(27, 35))])], 0)
    assert compute_dtype(model) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert compute_dtype(model) == torch.bfloat16
        scores = packed_head_outputs(model, rows)[:, 0].float()
        import rmspec.inference.prefix_mask as prefix_mask

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(prefix_mask, "additive_mask", lambda ok, dtype: ok)
            as_bool = packed_head_outputs(model, rows)[:, 0].float()
    assert torch.allclose(scores, as_bool, atol=2e-2), (scores, as_bool)  # bf16 compute


def test_a_context_parallel_rank_saves_one_mask_slice_for_every_layer():
    """The split forward (rmspec.train.context_parallel.head_outputs) makes its rank's mask slice once per step
    and every layer's SDPA keeps that one tensor for backward (one storage, not one per layer), so a rank's
    quadratic term is one [width/N, width] float mask (rmspec.plan.memory.packed_mask_bytes at the rank's share;
    bench/results/context_parallel_acceptance.md section 2). A gloo group of one process runs the same path."""
    import socket

    import torch.distributed as dist

    from rmspec.train import context_parallel as cp

    model = _model()
    rows = pack_groups([Group(list(range(1, 41)), [list(range(41, 51)), list(range(51, 63))])], 0)
    width = cp.pad_columns(rows, 2).input_ids.shape[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        cp.use_context_parallel_attention(model)
        masks: list[torch.Tensor] = []

        def keep(saved: torch.Tensor) -> torch.Tensor:
            if saved.dim() == 4 and tuple(saved.shape[-2:]) == (width, width):
                masks.append(saved)
            return saved

        with torch.autograd.graph.saved_tensors_hooks(keep, lambda saved: saved):
            cp.head_outputs(model, rows)
    finally:
        dist.destroy_process_group()
    assert len(masks) == 4, f"{len(masks)} masks saved by 4 layers"
    assert all(m.dtype == torch.float32 for m in masks)
    assert len({m.untyped_storage().data_ptr() for m in masks}) == 1, "a mask copy per layer"
