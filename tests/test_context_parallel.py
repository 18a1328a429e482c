"""Context parallelism (rmspec.train.context_parallel) is exact: 2 gloo processes equal one process.

Each case builds the same tiny decoder (2 layers, hidden 32, fp32) in both ranks and in one process;
the one-process side is rmspec's ordinary packed forward (packed_forward.packed_head_outputs with SDPA and
the whole row's mask), the other splits every row in 4 chunks over 2 ranks (two each), gathers keys and
values and reads each reward on the rank that holds it. Compared: the rewards, the loss, and the
gradient of every parameter (the two ranks' gradients summed), each within 1e-5.

Cases: a prompt-once pair of 2,558 tokens (odd lengths; both read points on rank 0); a pair whose read
points fall on different ranks; a batch of several pairs packed two to a row (PackedPairCollator); a
ranked list of 4 responses (Plackett-Luce); Qwen2 with a sliding-window layer (the per-layer-type mask).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch

from rmspec.inference.prefix_mask import Group, pack_groups
from rmspec.train.context_parallel import (
    ATTENTION_NAME,
    ContextParallelError,
    balanced_columns,
    check_supported,
    pad_columns,
)

VOCAB, PAD, TOL = 97, 0, 1e-5


def tiny(kind: str):
    from transformers import AutoModelForSequenceClassification, LlamaConfig, Qwen2Config

    from helpers.models import TINY_DECODER

    common = dict(TINY_DECODER, vocab_size=VOCAB, max_position_embeddings=4096, pad_token_id=PAD, num_labels=1)
    if kind == "llama":
        config = LlamaConfig(**common)
    else:  # layer 0 full, layer 1 sliding window 300: the mask goes in as a dict per layer type
        config = Qwen2Config(use_sliding_window=True, sliding_window=300, max_window_layers=1, **common)
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")


def tokens(n: int, seed: int) -> list[int]:
    return torch.randint(1, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def case_rows(case: str):
    """(rows, how the loss reads the outputs, the lengths) of each case."""
    from rmspec.train.packing import PackedPairCollator, packed_rows

    if case == "long_pair":  # width 2,558 -> 2,560: chunks of 640; both ends in chunk 3 (rank 0)
        return pack_groups([Group(tokens(1500, 1), [tokens(601, 2), tokens(457, 3)])], PAD), "pair"
    if case == "qwen2_window":  # 1,001 columns, window 300 shorter than the prompt
        return pack_groups([Group(tokens(600, 11), [tokens(251, 12), tokens(150, 13)])], PAD), "pair"
    if case == "split_read_points":  # width 1,001 -> 1,004, chunks of 251: chosen ends at 499 (chunk 1, rank 1),
        return pack_groups([Group(tokens(350, 4), [tokens(150, 5), tokens(501, 6)])], PAD), "pair"  # rejected 1,000
    if case == "several_pairs":
        rows = []
        for k in range(5):
            prompt = tokens(37 + 53 * k, 10 + k)
            rows.append(
                {
                    "chosen_input_ids": prompt + tokens(11 + 7 * k, 20 + k),
                    "rejected_input_ids": prompt + tokens(29 - 3 * k, 30 + k),
                }
            )
        return packed_rows(PackedPairCollator(pad_token_id=PAD)(rows)), "pair"
    if case == "ranked_list":
        return pack_groups([Group(tokens(901, 7), [tokens(n, 8 + n) for n in (123, 77, 301, 45)])], PAD), "list"
    raise AssertionError(case)


def loss_of(outputs: torch.Tensor, how: str) -> torch.Tensor:
    from rmspec.train.losses import bradley_terry_loss
    from rmspec.train.objectives.listwise import plackett_luce_loss

    scores = outputs[:, 0]
    if how == "pair":
        return bradley_terry_loss(scores[0::2], scores[1::2])
    labels = torch.tensor([[4.0, 2.0, 3.0, 1.0]])
    return plackett_luce_loss(scores[None, :], labels)


CASES = {"long_pair": "llama", "split_read_points": "llama", "several_pairs": "llama"}
CASES |= {"ranked_list": "llama", "qwen2_window": "qwen2"}


ATTENTIONS = {"masked": 10**9, "blocks": 128}  # block_attention.BLOCK: no row is wider / rows of several blocks
RUNS = [(case, kind, how) for case, kind in CASES.items() for how in ATTENTIONS if kind == "llama" or how == "masked"]


def worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from rmspec.inference import block_attention, packed_forward
    from rmspec.inference.packed_forward import packed_head_outputs
    from rmspec.train import context_parallel as cp

    planned: list[int] = []
    make_plan = packed_forward.block_plan
    packed_forward.block_plan = lambda *a, **k: planned.append(1) or make_plan(*a, **k)  # type: ignore[misc]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results = {}
    try:
        for case, kind, attention in RUNS:
            rows, how = case_rows(case)
            model = tiny(kind)
            cp.use_context_parallel_attention(model)
            block_attention.BLOCK, planned[:] = ATTENTIONS[attention], []
            cp_out = cp.head_outputs(model, rows)
            cp_loss = loss_of(cp_out, how)
            cp_loss.backward()
            by_blocks = bool(planned)
            for p in model.parameters():
                dist.reduce(p.grad, dst=0)  # the group's gradients add up to one process's
            if rank:
                continue
            block_attention.BLOCK = ATTENTIONS["masked"]  # one process: the ordinary packed forward, whole mask
            reference = tiny(kind)
            ref_out = packed_head_outputs(reference, rows)
            ref_loss = loss_of(ref_out, how)
            ref_loss.backward()
            grads = {}
            for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters(), strict=True):
                grads[name] = (float((p.grad - q.grad).abs().max()), float(q.grad.abs().max()))
            ends = (rows.ends % rows.input_ids.shape[1]).tolist()
            results[f"{case}/{attention}"] = {
                "rewards": float((cp_out - ref_out).abs().max().detach()),
                "reward_scale": float(ref_out.abs().max().detach()),
                "loss": abs(float(cp_loss) - float(ref_loss)),
                "grads": grads,
                "width": rows.input_ids.shape[1],
                "ends": ends,
                "n_rewards": int(ref_out.shape[0]),
                "real_tokens": rows.real_tokens,
                "by_blocks": by_blocks,
            }
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(results))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("cp") / "results.json"
    mp.start_processes(worker, args=(2, free_port(), str(out)), nprocs=2, start_method="spawn", join=True)
    results = json.loads(out.read_text())
    for case, r in results.items():  # the figures, for the report (pytest -s)
        print(case, "rewards", r["rewards"], "loss", r["loss"], "grads", max(d for d, _ in r["grads"].values()))
    return results


@pytest.mark.parametrize("case,attention", [(case, how) for case, _, how in RUNS])
def test_two_gloo_ranks_equal_one_process(measured, case, attention):
    """Split over 2 ranks, through the rank's mask slice or by blocks, against one process's whole-row mask."""
    result = measured[f"{case}/{attention}"]
    assert result["by_blocks"] == (attention == "blocks"), result["by_blocks"]
    assert result["rewards"] <= TOL, result
    assert result["loss"] <= TOL, result
    assert result["grads"], "no parameter compared"
    for name, (diff, scale) in result["grads"].items():
        assert scale > 0, f"{name}: no gradient reached it in one process"
        assert diff <= TOL, f"{case}: {name} gradient differs by {diff} (largest {scale})"


def test_the_cases_cover_what_they_claim(measured):
    """A long pair; read points on different ranks; odd lengths; several pairs; a list."""
    assert measured["long_pair/masked"]["real_tokens"] == 2558 and measured["long_pair/masked"]["width"] == 2558
    assert measured["split_read_points/blocks"]["width"] == 1001
    width = measured["split_read_points/blocks"]["width"] + 3  # padded to 1,004 columns, chunks of 251
    owner = {c: rank for rank in (0, 1) for c in balanced_columns(width, 2, rank).tolist()}
    assert {owner[e] for e in measured["split_read_points/blocks"]["ends"]} == {0, 1}
    assert measured["several_pairs/blocks"]["n_rewards"] == 10
    assert measured["ranked_list/blocks"]["n_rewards"] == 4


def test_each_rank_holds_one_early_and_one_late_chunk():
    assert balanced_columns(8, 2, 0).tolist() == [0, 1, 6, 7]
    assert balanced_columns(8, 2, 1).tolist() == [2, 3, 4, 5]
    both = sorted(
        balanced_columns(12, 3, 0).tolist() + balanced_columns(12, 3, 1).tolist() + balanced_columns(12, 3, 2).tolist()
    )
    assert both == list(range(12))
    with pytest.raises(ContextParallelError):
        balanced_columns(10, 2, 0)


def test_padding_keeps_the_read_points():
    rows = pack_groups([Group([1, 2, 3], [[4, 5], [6]]), Group([7], [[8], [9, 10]])], PAD)
    padded = pad_columns(rows, 4)
    assert padded.input_ids.shape[1] % 4 == 0
    flat_before = rows.input_ids.reshape(-1)[rows.ends]
    flat_after = padded.input_ids.reshape(-1)[padded.ends]
    assert torch.equal(flat_before, flat_after)
    assert (padded.group[:, rows.input_ids.shape[1] :] == -1).all()


def test_attention_that_takes_no_mask_is_refused():
    from transformers import BertConfig, LlamaConfig

    flash = LlamaConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=4, intermediate_size=64)
    flash._attn_implementation = "flash_attention_2"
    with pytest.raises(ContextParallelError, match="flash attention takes none"):
        check_supported(flash)
    bert = BertConfig()
    bert._attn_implementation = "sdpa"
    with pytest.raises(ContextParallelError, match="both directions"):
        check_supported(bert)
    llama = LlamaConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=4, intermediate_size=64)
    for impl in ("sdpa", "eager", ATTENTION_NAME):
        llama._attn_implementation = impl
        check_supported(llama)


def test_a_model_not_switched_to_the_attention_is_refused():
    from rmspec.train.context_parallel import head_outputs

    rows = pack_groups([Group([1, 2, 3], [[4, 5], [6]])], PAD)
    with pytest.raises(ContextParallelError, match="use_context_parallel_attention"):
        head_outputs(tiny("llama"), rows)
