"""The plan's time estimate adds the context-parallel groups' key/value traffic (rmspec.plan.communication).

Each rank all-gathers its group's keys and values in every attention layer (forward), sends their gradients
back (backward: a reduce-scatter), and gathers them again in gradient checkpointing's recompute; each pass
moves (N-1)/N of the whole row's keys and values per micro step. The expected figures are computed here by
hand from that description and the link bandwidths, not read from the module. Light side: no torch.
"""

from __future__ import annotations

import pytest

from helpers import REPO
from rmspec.plan import compile_plan
from rmspec.plan.communication import context_parallel_bytes, context_parallel_communication
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

HOST = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)
GB_S = {"nvlink": 450e9, "ethernet": 12.5e9, "pcie": 25e9, "infiniband": 50e9}
LLAMA_64K = "llama8b_64k_context_parallel.yaml"
DECODER_GPU = [  # the shipped SmolLM2 decoder on 2 GPUs, one group of 2, micro batch fixed so on/off compare
    "hardware.device=h100-80gb",
    "hardware.gpus_per_node=2",
    "hardware.context_parallel=2",
    "training.micro_batch_size=4",
    "hardware.interconnect=pcie",
]


def plan(spec: str, sets: list[str]):
    return compile_plan(load_spec(REPO / "specs" / spec, sets), host=HOST, sets=sets)


def test_bytes_and_seconds_by_hand():
    # 4 layers, 2 key/value heads x 64 dims, a row of 1,000 tokens over N = 4, bf16, 2 rows per micro step,
    # 3 micro steps: one pass moves 3/4 x 4 layers x 2 rows x 2 (keys, values) x 1,000 x 128 x 2 bytes
    one_pass = 0.75 * 4 * 2 * 2 * 1000 * 128 * 2
    assert one_pass == 3_072_000
    shape = dict(degree=4, num_layers=4, kv_dim=2 * 64, rows_per_micro_step=2, width=1000, bytes_per_element=2)
    off = context_parallel_bytes(**shape, checkpointing=False, gradient_accumulation_steps=3)
    on = context_parallel_bytes(**shape, checkpointing=True, gradient_accumulation_steps=3)
    assert off == 2 * one_pass * 3 == 18_432_000  # forward gather + backward reduce-scatter
    assert on == 3 * one_pass * 3 == 27_648_000  # + the recompute's gather
    fp32 = context_parallel_bytes(
        **{**shape, "bytes_per_element": 4}, checkpointing=False, gradient_accumulation_steps=3
    )
    assert fp32 == 2 * off
    assert context_parallel_bytes(**{**shape, "degree": 1}, checkpointing=True, gradient_accumulation_steps=3) == 0
    timed = context_parallel_communication(
        moved_bytes=on,
        degree=4,
        gpus_per_node=8,
        nodes=1,
        is_gpu=True,
        interconnect="pcie",
        checkpointing=True,
        row_tokens=1000,
    )
    assert timed["bytes_per_step"] == 27_648_000
    assert timed["seconds_per_step"] == pytest.approx(27_648_000 / GB_S["pcie"], abs=1e-4)
    assert timed["within_node"] and timed["link"] == "within one node"

    # Llama-3.1-8B at a 131,072-token row over N = 2 (32 layers, 8 key/value heads x 128), bf16, checkpointing,
    # micro batch 1, 16 micro steps: 3 x 32 x 1/2 x 2 x 131,072 x 1,024 x 2 x 16 = 384 GiB per rank
    llama = context_parallel_bytes(
        degree=2,
        num_layers=32,
        kv_dim=8 * 128,
        rows_per_micro_step=1,
        width=131_072,
        bytes_per_element=2,
        checkpointing=True,
        gradient_accumulation_steps=16,
    )
    assert llama == 384 * 1024**3 == 412_316_860_416
    assert llama / GB_S["nvlink"] == pytest.approx(0.9163, abs=1e-4)


def test_the_link_is_the_nodes_when_a_group_fits_on_one_else_it_crosses_nodes():
    facts = dict(moved_bytes=1e9, is_gpu=True, interconnect="infiniband", checkpointing=False, row_tokens=8)
    # groups are consecutive ranks (rmspec.train.context_parallel_run.layout): 2 of a node's 8 GPUs
    assert context_parallel_communication(degree=2, gpus_per_node=8, nodes=2, **facts)["within_node"]
    # 4 ranks per group on nodes of 2 GPUs, or of 6 (ranks 4-7 straddle the first two nodes)
    for per_node in (2, 6):
        across = context_parallel_communication(degree=4, gpus_per_node=per_node, nodes=2, **facts)
        assert not across["within_node"] and across["link"].startswith("across nodes")
        assert across["seconds_per_step"] == pytest.approx(1e9 / GB_S["infiniband"], abs=1e-4)
    # no split, or CPU processes: nothing modelled, as for the data-parallel traffic
    assert context_parallel_communication(degree=1, gpus_per_node=8, nodes=1, **facts) is None
    assert context_parallel_communication(degree=2, gpus_per_node=2, nodes=1, **{**facts, "is_gpu": False}) is None


def test_with_two_links_a_group_in_a_node_runs_at_its_link_and_one_across_at_the_link_between():
    facts = dict(moved_bytes=1e9, is_gpu=True, interconnect="nvlink", checkpointing=False, row_tokens=8)
    two = {**facts, "between_nodes": "infiniband"}
    inside = context_parallel_communication(degree=2, gpus_per_node=8, nodes=2, **two)
    assert inside["link"] == "within one node" and inside["interconnect"] == "nvlink"
    assert inside["seconds_per_step"] == pytest.approx(1e9 / GB_S["nvlink"], abs=1e-4)
    across = context_parallel_communication(degree=4, gpus_per_node=2, nodes=2, **two)
    assert across["interconnect"] == "infiniband"
    assert across["seconds_per_step"] == pytest.approx(1e9 / GB_S["infiniband"], abs=1e-4)
    one_link = context_parallel_communication(degree=4, gpus_per_node=2, nodes=2, **facts)  # as before: nvlink
    assert one_link["seconds_per_step"] == pytest.approx(1e9 / GB_S["nvlink"], abs=1e-4)


@pytest.fixture(scope="module")
def llama():
    return plan(LLAMA_64K, [])


def test_the_64k_plan_adds_the_traffic_to_its_step_time(llama):
    est, cp, shape = llama.estimate, llama.context_parallel, llama.model.shape
    assert cp["degree"] == 2 and llama.gradient_checkpointing and llama.strategy == "fsdp_shard_grad_op"
    width = cp["padded_tokens"]
    assert est["tokens_per_sequence"] == width == 131_072  # the stand-in source: rows at their bound
    kv_dim = shape["num_key_value_heads"] * shape["head_dim"]
    moved = (
        3  # forward gather, recompute gather (checkpointing), backward reduce-scatter
        * shape["num_layers"]
        * (2 - 1)
        / 2
        * llama.micro_batch_size
        * 2
        * width
        * kv_dim
        * 2  # bf16
        * llama.gradient_accumulation_steps
    )
    traffic = est["context_parallel_communication"]
    assert traffic["bytes_per_step"] == pytest.approx(moved, rel=1e-12)
    assert traffic["seconds_per_step"] == pytest.approx(moved / GB_S["nvlink"], abs=1e-4)
    assert traffic["interconnect"] == "nvlink" and traffic["within_node"]
    # the step is compute + the strategy's traffic + the groups' keys and values
    assert est["seconds_per_step"] == pytest.approx(
        est["compute_seconds_per_step"] + est["communication"]["seconds_per_step"] + traffic["seconds_per_step"],
        abs=2e-4,
    )
    # the section states the same bytes (in GiB) at the row bound, the same row here
    assert cp["communication_gb_per_step"] == pytest.approx(moved / 1024**3, abs=1e-3)


def test_rmspec_plan_shows_the_figure(cli):
    result = cli("plan", REPO / "specs" / LLAMA_64K)
    assert result.code == 0, result.err
    lines = [line for line in result.out.splitlines() if "context parallel ~" in line]
    assert len(lines) == 1, result.out
    assert "916 ms per step: 412.32 GB per rank over nvlink at 450 GB/s, within one node" in lines[0]
    assert "recompute" in lines[0]
    assert "communication 384.00 GB per rank per step" in result.out  # the section, in GiB
    assert "again in the recompute" in result.out


def test_checkpointing_recompute_gathers_again():
    """Fails if the recompute's gather is dropped: with checkpointing the same plan moves 3/2 the bytes."""
    on = plan("quickstart_decoder.yaml", [*DECODER_GPU, "training.gradient_checkpointing=on"])
    off = plan("quickstart_decoder.yaml", [*DECODER_GPU, "training.gradient_checkpointing=off"])
    assert on.gradient_checkpointing and not off.gradient_checkpointing
    assert (on.micro_batch_size, on.gradient_accumulation_steps) == (
        off.micro_batch_size,
        off.gradient_accumulation_steps,
    )
    got_on = on.estimate["context_parallel_communication"]
    got_off = off.estimate["context_parallel_communication"]
    assert got_on["bytes_per_step"] / got_off["bytes_per_step"] == pytest.approx(1.5, rel=1e-9)
    assert on.context_parallel["communication_gb_per_step"] == pytest.approx(
        1.5 * off.context_parallel["communication_gb_per_step"], rel=1e-3
    )
    assert (
        on.context_parallel["kv_passes_per_micro_step"] == 3 and off.context_parallel["kv_passes_per_micro_step"] == 2
    )
    # and the step time grows by the difference on the link (pcie here)
    extra = (got_on["bytes_per_step"] - got_off["bytes_per_step"]) / GB_S["pcie"]
    assert got_on["seconds_per_step"] - got_off["seconds_per_step"] == pytest.approx(extra, abs=2e-4)


def test_a_cpu_plan_adds_no_time_but_states_the_bytes():
    cpu = plan(
        "quickstart_decoder.yaml",
        ["hardware.device=cpu", "hardware.gpus_per_node=2", "hardware.cpu_memory_gb=16", "hardware.context_parallel=2"],
    )
    assert cpu.context_parallel["communication_gb_per_step"] > 0
    assert "context_parallel_communication" not in cpu.estimate
    assert "communication not modelled" in cpu.estimate["note"]


def test_a_group_across_nodes_is_timed_on_the_link_between_them():
    sets = ["hardware.gpus_per_node=2", "hardware.nodes=4", "hardware.interconnect=infiniband"]
    across = plan(LLAMA_64K, [*sets, "hardware.context_parallel=4"])
    traffic = across.estimate["context_parallel_communication"]
    assert not traffic["within_node"] and traffic["link"].startswith("across nodes")
    assert traffic["seconds_per_step"] == pytest.approx(traffic["bytes_per_step"] / GB_S["infiniband"], abs=1e-4)


def test_auto_names_the_traffic_of_the_n_it_chose(llama):
    """A rank's key/value bytes per step grow as N - 1 ((N-1)/N of N x the processes' share of the batch's
    rows): auto's smallest N that fits is also the one that moves the least, and its reason says how much."""
    chosen = llama.context_parallel["chosen"]
    assert "the smallest N moves the least keys and values: 412.3 GB per rank, ~0.92 s per step over nvlink" in chosen
    four = plan(LLAMA_64K, ["hardware.context_parallel=4"])
    assert "chosen" not in four.context_parallel  # an explicit number has no auto reason
    ratio = (
        four.estimate["context_parallel_communication"]["bytes_per_step"]
        / llama.estimate["context_parallel_communication"]["bytes_per_step"]
    )
    assert ratio == pytest.approx((4 - 1) / (2 - 1), rel=1e-9)
