"""Gathering keys and values (rmspec's context parallelism) against Ulysses' all-to-all, by their collectives.

Per attention layer and forward, one rank of a group of N moves:
- gather (rmspec.train.context_parallel): an all-gather of its keys and values after RoPE, at the key/value
  heads: the row's K and V come back whole, (N-1)/N x row x 2 x kv_dim elements received;
- Ulysses (DeepSpeed-Ulysses, turbo-alignment's sequence parallelism): an all-to-all of Q, K and V from
  sequence-sharded to head-sharded before attention, and one of the output back after it,
  (N-1)/N x (row / N) x (2 x q_dim + 2 x kv_dim) elements each way; its degree is bounded by the key/value heads
  (or they are repeated).
The backward mirrors each. The bench times the two collectives on gloo, N = 2 processes on this host, fp32, for
the issue's bench model (8 heads, 4 key/value heads, head_dim 32) and for Llama-3.1-8B's attention (32 heads, 8
key/value heads, head_dim 128), at rows of 4,096 and 16,384 tokens, median of --repeats after a warm-up; with the
bytes each rank receives, computed from the shapes.

    OMP_NUM_THREADS=1 .venv/bin/python bench/context_parallel_ulysses.py --repeats 5

Appends to bench/results/context_parallel_ulysses.jsonl and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "context_parallel_ulysses.jsonl"
SHAPES = {
    "bench model (8 / 4 heads, head_dim 32)": (8, 4, 32),
    "Llama-3.1-8B (32 / 8 heads, head_dim 128)": (32, 8, 128),
}


def gather(tensors, world: int) -> None:
    """rmspec's forward collective: every rank's keys and values, whole."""
    import torch
    import torch.distributed as dist

    for t in tensors:
        dist.all_gather([torch.empty_like(t) for _ in range(world)], t)


def all_to_all(buffer) -> None:
    """Ulysses' exchange: row/N x features split by rank, (N-1)/N of it leaves and as much arrives."""
    import torch
    import torch.distributed as dist

    dist.all_to_all_single(torch.empty_like(buffer), buffer)


def one_rank(rank: int, world: int, port: int, repeats: int, lengths: list[int], out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    rows = []
    for name, (heads, kv_heads, head_dim) in SHAPES.items():
        q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
        for length in lengths:
            local = length // world
            k = torch.randn(local, kv_dim)
            v = torch.randn(local, kv_dim)
            qkvo = torch.randn(local, 2 * q_dim + 2 * kv_dim)  # Q, K, V in, the output back: one buffer each way

            for label, step, received in (
                ("gather K, V", partial(gather, (k, v), world), (world - 1) / world * length * 2 * kv_dim * 4),
                (
                    "Ulysses all-to-all Q, K, V, O",
                    partial(all_to_all, qkvo),
                    (world - 1) / world * local * (2 * q_dim + 2 * kv_dim) * 4,
                ),
            ):
                step()  # warm-up
                times = []
                for _ in range(repeats):
                    dist.barrier()
                    start = time.perf_counter()
                    step()
                    times.append(time.perf_counter() - start)
                rows.append(
                    {
                        "shape": name,
                        "tokens": length,
                        "collective": label,
                        "ms": round(statistics.median(times) * 1e3, 2),
                        "spread_ms": round((max(times) - min(times)) * 1e3, 2),
                        "mib_received_per_rank": round(received / 2**20, 2),
                    }
                )
    if rank == 0:
        Path(out).write_text(json.dumps(rows))
    dist.destroy_process_group()


def main() -> None:
    import torch.multiprocessing as mp

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "rows.json")
        mp.start_processes(one_rank, args=(2, port, args.repeats, args.lengths, out), nprocs=2, start_method="spawn")
        rows = json.loads(Path(out).read_text())
    after = os.getloadavg()[0]
    with RESULTS.open("a") as f:
        for row in rows:
            f.write(json.dumps({**row, "repeats": args.repeats, "load_before": load, "load_after": after}) + "\n")
    print(f"load {load:.2f} -> {after:.2f}; N = 2 gloo processes, fp32, median of {args.repeats}")
    for row in rows:
        print(
            f"{row['shape']:42s} {row['tokens']:6d}  {row['collective']:30s} {row['ms']:8.2f} ms "
            f"(spread {row['spread_ms']:.2f})  {row['mib_received_per_rank']:8.2f} MiB a rank"
        )


if __name__ == "__main__":
    main()
