"""Context parallelism on this CPU: peak memory per rank and tokens/s against the length of a prompt-once pair.

One packed pair [prompt | chosen | rejected] (prompt 3/4 of the row, the responses 1/8 each) through a tiny
Llama-shaped decoder built from a config (4 layers, hidden 256, 8 heads / 4 KV heads, fp32), forward and
backward of the Bradley-Terry loss: N = 1 is rmspec's ordinary packed forward in one process
(packed_forward.packed_head_outputs), N = 2 is rmspec.train.context_parallel over 2 gloo processes on this
host. Each (N, length) runs in fresh processes: peak memory per rank is the rise of the process's peak
resident set (ru_maxrss) over its resident set just before the first step (the model, torch and the
batch already there), the largest over the ranks; tokens/s is the row's real tokens over the median of
the timed steps (after one warm-up step).

    .venv/bin/python bench/context_parallel.py [--lengths 1024 2048 4096 8192] [--steps 3]

writes bench/results/context_parallel.md (and .jsonl beside it), with the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
LAYERS, HIDDEN, HEADS, KV_HEADS, INTER, VOCAB = 4, 256, 8, 4, 688, 1000


def model():
    import torch
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=65536,
        pad_token_id=0,
        num_labels=1,
    )
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")


def pair_rows(length: int):
    import torch

    from rmspec.inference.prefix_mask import Group, pack_groups

    g = torch.Generator().manual_seed(length)
    prompt, response = length * 3 // 4, length // 8
    ids = lambda n: torch.randint(1, VOCAB, (n,), generator=g).tolist()  # noqa: E731
    return pack_groups([Group(ids(prompt), [ids(response), ids(length - prompt - response)])], 0)


def choose_attention() -> str:
    """The packed attention this process runs (``BENCH_ATTENTION``, inherited by spawned ranks): "blocks", rmspec's
    default on CPU for rows wider than a block, or "masked", the whole row's (or a rank's slice of the) mask."""
    from rmspec.inference import block_attention

    how = os.environ.get("BENCH_ATTENTION", "blocks")
    if how == "masked":
        block_attention.BLOCK = 10**9  # no row is wider than one block: every row keeps the masked path
    return how


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_rank(rank: int, world: int, port: int, length: int, steps: int, out: str) -> None:
    import torch
    import torch.nn.functional as F

    from rmspec.inference.packed_forward import packed_head_outputs

    torch.set_num_threads(1)
    choose_attention()
    if world > 1:
        import torch.distributed as dist

        from rmspec.train import context_parallel as cp

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    m = model()
    rows = pair_rows(length)
    if world > 1:
        cp.use_context_parallel_attention(m)
        forward = lambda: cp.head_outputs(m, rows)  # noqa: E731
    else:
        forward = lambda: packed_head_outputs(m, rows)  # noqa: E731
    before = rss_bytes()
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        scores = forward()[:, 0]
        loss = -F.logsigmoid(scores[0] - scores[1])
        loss.backward()
        m.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    Path(f"{out}.{rank}").write_text(json.dumps({"peak": peak, "times": times[1:], "tokens": rows.real_tokens}))


def measure(world: int, length: int, steps: int, tmp: Path) -> dict:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp / f"n{world}_{length}"
    mp.start_processes(one_rank, args=(world, port, length, steps, str(out)), nprocs=world, start_method="spawn")
    ranks = [json.loads(Path(f"{out}.{r}").read_text()) for r in range(world)]
    step = statistics.median(max(r["times"][i] for r in ranks) for i in range(steps))
    return {
        "n": world,
        "length": length,
        "attention": os.environ.get("BENCH_ATTENTION", "blocks"),
        "peak_mib_per_rank": round(max(r["peak"] for r in ranks) / 2**20, 1),
        "seconds_per_step": round(step, 3),
        "tokens_per_s": round(ranks[0]["tokens"] / step, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    import tempfile

    load_before = os.getloadavg()[0]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for length in args.lengths:
            for world in (1, 2):
                rows.append(measure(world, length, args.steps, Path(tmp)))
                print(rows[-1], flush=True)
                write(rows, args, load_before, os.getloadavg()[0])  # each figure as it comes


def write(rows: list[dict], args: argparse.Namespace, load_before: float, load_after: float) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "context_parallel.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = [
        "# Context parallelism on CPU: peak memory per rank and tokens/s against pair length",
        "",
        f"Command: `.venv/bin/python bench/context_parallel.py --lengths {' '.join(map(str, args.lengths))} "
        f"--steps {args.steps}`",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores shared with other "
        f"jobs (load average {load_before:.1f} before, {load_after:.1f} after: the timings are noisy and slower "
        "than an idle machine's; one torch thread per process).",
        f"Model: Llama-shaped, {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads / {KV_HEADS} KV heads, "
        f"intermediate {INTER}, fp32, SDPA; one prompt-once pair per step (prompt 3/4 of the row), forward and "
        "backward of the Bradley-Terry loss. N = 2: two gloo processes on this host.",
        "",
        "Peak memory per rank: rise of the peak resident set over the resident set before the first step "
        "(model and batch already resident), the larger of the ranks.",
        "",
        "Reading: a rank of N = 2 holds half the row's activations but also every layer's gathered keys and "
        "values and a mask slice of half the row by the whole row, so its peak is more than half of one "
        "process's. Each process runs one torch thread, so N = 2 computes on two cores where N = 1 uses one: "
        "its tokens/s measures the split's overhead on this host, not a speed-up per core.",
        "",
        "| tokens | N | peak MiB per rank | s per step | tokens/s |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['length']:,} | {r['n']} | {r['peak_mib_per_rank']} | {r['seconds_per_step']} | {r['tokens_per_s']} |"
        for r in rows
    ]
    (RESULTS / "context_parallel.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
