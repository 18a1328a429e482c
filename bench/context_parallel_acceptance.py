"""Issue 49's acceptance figures on this CPU, with bench/context_parallel.py's model and measurement.

1. plan: the plan's activation memory per rank (rmspec.plan.memory.activation_bytes and packed_mask_bytes
   for N = 1, rmspec.plan.context_parallel.per_rank_memory's activations + gathered keys/values + mask slice
   for N = 2) beside the measured peak rise per rank, for each length. With --tensors, each point measures
   three ways in the same processes (tensor_rank): the rise of ru_maxrss over the first two steps (what the
   plain part reads: tensors plus the allocator's slack, freed memory glibc keeps), the resident-set rise of
   one later step alone (malloc_trim, VmHWM reset), and the peak of live tensor bytes of one step
   (torch.distributed._tools.mem_tracker.MemTracker, in each rank, through the real gloo collectives; the
   figure is its total less parameters and buffers); with --census also the tensors autograd keeps for
   backward, by node and field, each storage once (saved_census); with --mmap-threshold BYTES the rank
   processes run with glibc's MALLOC_MMAP_THRESHOLD_ fixed (every tensor over it mapped and unmapped on its
   own), which shows how much of the ru_maxrss rise is the heap keeping freed memory;
2. cap: the longest prompt-once pair whose measured peak rise per rank stays under --cap-mib, N = 1 and
   N = 2 (--degrees: one of them, so each can take its own --cap-lo/--cap-hi), by bisection at 512-token
   resolution between --cap-lo and --cap-hi (both measured first; lo must come out under, hi over);
3. speed: one prompt-once packed row (prompt = length - 2 x response, two responses, rmspec's pack_groups
   and packed_head_outputs) against the two sequences TRL runs ([prompt+chosen, prompt+rejected] as a batch of
   2 through the model's own forward), forward + backward of the Bradley-Terry loss, N = 1, --repeats times.

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/context_parallel_acceptance.py plan --lengths 4096 8192
    ... plan --lengths 4096 8192 --tensors --census
    ... plan --lengths 4096 8192 --tensors --mmap-threshold 131072
    ... cap --cap-mib 1024 --cap-lo 4096 --cap-hi 8192
    ... cap --cap-mib 1024 --degrees 2 --cap-lo 8192 --cap-hi 12288
    ... speed --lengths 4096 8192 --repeats 3 --response 256

Each part appends its rows to bench/results/context_parallel_acceptance.jsonl with the load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import context_parallel as base  # noqa: E402

OUT = base.RESULTS / "context_parallel_acceptance.jsonl"


def emit(row: dict) -> None:
    row = {**row, "load": os.getloadavg()[0], "utc": time.strftime("%H:%M:%S", time.gmtime())}
    print(row, flush=True)
    with OUT.open("a") as f:
        f.write(json.dumps(row) + "\n")


def plan_bytes(length: int, degree: int) -> dict:
    """The plan's own per-rank activation figure for bench/context_parallel.py's model and row."""
    from rmspec.plan.blocks import attends_by_blocks
    from rmspec.plan.context_parallel import per_rank_memory, split_tokens
    from rmspec.plan.memory import MemoryEstimate, TrainingShape, activation_bytes, packed_mask_bytes
    from rmspec.plan.model_shape import shape_from_config

    shape = shape_from_config(base.model().config.to_dict(), "bench")
    _, local = split_tokens(length, degree)
    t = TrainingShape(
        micro_batch=1,
        seqs_per_example=1,
        seq_len=local if degree > 1 else length,
        head="score",
        precision="fp32",
        master_fp32=False,
        checkpointing=False,
        attn="sdpa",
        packed=True,
        # as `rmspec run` decides it for the whole row (plan.blocks.attends_by_blocks), unless --attention masked
        blocks=os.environ.get("BENCH_ATTENTION", "blocks") == "blocks"
        and attends_by_blocks(True, length, is_gpu=False, sliding_window=False),
    )
    act, mask = activation_bytes(shape, t), packed_mask_bytes(t)
    if degree == 1:
        return {"plan_activations": act, "plan_mask": mask, "plan_gathered": 0.0, "plan_total": act + mask}
    mem = MemoryEstimate(
        weights=0,
        gradients=0,
        optimizer=0,
        activations=act,
        temporary=mask,
        buffers=0,
        step_temporary=0,
        overhead=0,
        grads_held=False,
    )
    adjusted, extra = per_rank_memory(shape, t, mem, degree=degree, row_tokens=length)
    return {
        "plan_activations": act - extra["own_kv"],  # the rank's own keys and values go into the gather
        "plan_mask": extra["mask"],
        "plan_gathered": extra["gathered"],
        "plan_total": adjusted.activations + adjusted.temporary,
    }


def measure(world: int, length: int, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return base.measure(world, length, steps, Path(tmp))


def saved_census(loss) -> dict[str, int]:
    """Bytes autograd keeps for backward, by (node type, saved field), each storage counted once (the first
    node reached from ``loss`` that holds it): what the forward leaves for the backward to read."""
    import torch

    seen: set[int] = set()
    out: dict[str, int] = {}
    stack, visited = [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in visited:
            continue
        visited.add(node)
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                value = getattr(node, attr)
            except Exception:  # noqa: BLE001 (a field freed or not a tensor)
                continue
            for t in value if isinstance(value, tuple) else (value,):
                if isinstance(t, torch.Tensor) and t.numel():
                    key = t.untyped_storage().data_ptr()
                    if key not in seen:
                        seen.add(key)
                        name = f"{type(node).__name__}.{attr[7:]}"
                        out[name] = out.get(name, 0) + t.untyped_storage().nbytes()
        stack.extend(f for f, _ in node.next_functions)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _steady_rise(step) -> int:
    """Peak resident set rise of one ``step()`` alone: what the allocator keeps of earlier steps handed back
    first (glibc's malloc_trim), the kernel's high-water mark (VmHWM) reset (/proc/self/clear_refs 5), so
    the first step's one-time costs and earlier peaks are left out."""
    import ctypes

    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")
    start = base.rss_bytes()
    step()
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM"))
    return int(hwm.split()[1]) * 1024 - start


def tensor_rank(rank: int, world: int, port: int, length: int, out: str, census: bool) -> None:
    """One rank of a --tensors point: the same two steps base.one_rank measures (ru_maxrss rise), then one
    step's resident-set rise alone (VmHWM), one under MemTracker (peak of live tensor bytes, by kind) and,
    with ``census``, one whose saved tensors are counted by autograd node before its backward."""
    import torch
    import torch.nn.functional as F
    from torch.distributed._tools.mem_tracker import MemTracker

    from rmspec.inference.packed_forward import packed_head_outputs

    torch.set_num_threads(1)
    base.choose_attention()
    if world > 1:
        import torch.distributed as dist

        from rmspec.train import context_parallel as cp

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    m = base.model()
    rows = base.pair_rows(length)
    if world > 1:
        cp.use_context_parallel_attention(m)
        forward = lambda: cp.head_outputs(m, rows)  # noqa: E731
    else:
        forward = lambda: packed_head_outputs(m, rows)  # noqa: E731

    def loss_of():
        scores = forward()[:, 0]
        return -F.logsigmoid(scores[0] - scores[1])

    def step() -> None:
        loss_of().backward()
        m.zero_grad(set_to_none=True)

    before = base.rss_bytes()
    step()
    step()
    row: dict = {"maxrss_rise": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before}
    row["steady_rss_rise"] = _steady_rise(step)
    tracker = MemTracker()
    tracker.track_external(m)
    with tracker:
        step()
    peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    row["live_peak"] = {str(getattr(k, "value", k)): v for k, v in peak.items() if v}
    if census:
        loss = loss_of()
        row["saved"] = saved_census(loss)
        loss.backward()
        m.zero_grad(set_to_none=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    Path(f"{out}.{rank}").write_text(json.dumps(row))


def measure_tensors(world: int, length: int, census: bool) -> list[dict]:
    """Each rank's figures (tensor_rank) for one (N, length) point, in fresh processes."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/n{world}_{length}"
        mp.start_processes(tensor_rank, args=(world, port, length, out, census), nprocs=world, start_method="spawn")
        return [json.loads(Path(f"{out}.{r}").read_text()) for r in range(world)]


def tensors_row(n: int, length: int, ranks: list[dict]) -> dict:
    """One --tensors point: each measure the larger of the ranks (MiB), against the plan."""
    p = plan_bytes(length, n)
    mib = lambda b: round(b / 2**20, 1)  # noqa: E731
    live = [
        r["live_peak"]["Total"] - r["live_peak"].get("Parameter", 0) - r["live_peak"].get("Buffer", 0) for r in ranks
    ]
    row = {
        "part": "plan",
        "measure": "tensors",
        "attention": os.environ.get("BENCH_ATTENTION", "blocks"),
        "n": n,
        "length": length,
        "maxrss_rise_mib": mib(max(r["maxrss_rise"] for r in ranks)),
        "steady_rss_rise_mib": mib(max(r["steady_rss_rise"] for r in ranks)),
        "live_peak_mib": mib(max(live)),
        "live_kinds_mib": {k: mib(v) for k, v in ranks[0]["live_peak"].items()},
        **{k: mib(v) for k, v in p.items()},
        "live_over_plan": round(max(live) / p["plan_total"], 3),
        "maxrss_over_plan": round(max(r["maxrss_rise"] for r in ranks) / p["plan_total"], 3),
    }
    if "saved" in ranks[0]:
        row["saved_mib"] = {k: mib(v) for k, v in ranks[0]["saved"].items() if v >= 2**18}
    return row


def cmd_plan(args) -> None:
    for length in args.lengths:
        for n in args.degrees:
            if args.tensors:
                row = tensors_row(n, length, measure_tensors(n, length, args.census))
                emit({**row, "malloc_mmap_threshold": args.mmap_threshold or "glibc default (dynamic)"})
                continue
            m = measure(n, length, args.steps)
            p = plan_bytes(length, n)
            emit(
                {
                    "part": "plan",
                    **m,
                    **{k: round(v / 2**20, 1) for k, v in p.items()},
                    "measured_over_plan": round(m["peak_mib_per_rank"] / (p["plan_total"] / 2**20), 2),
                }
            )


def cmd_cap(args) -> None:
    mmap = {"malloc_mmap_threshold": args.mmap_threshold} if args.mmap_threshold else {}
    for n in args.degrees:
        lo, hi = args.cap_lo, args.cap_hi  # lo assumed under the cap, hi over it: checked first
        for length in (lo, hi):
            m = measure(n, length, args.steps)
            emit({"part": "cap", "cap_mib": args.cap_mib, **m, "under": m["peak_mib_per_rank"] < args.cap_mib, **mmap})
        while hi - lo > 512:
            mid = (lo + hi) // 2 // 512 * 512
            m = measure(n, mid, args.steps)
            under = m["peak_mib_per_rank"] < args.cap_mib
            emit({"part": "cap", "cap_mib": args.cap_mib, **m, "under": under, **mmap})
            lo, hi = (mid, hi) if under else (lo, mid)


def two_sequences(length: int, response: int, steps: int, packed: bool) -> dict:
    """In this process (one torch thread): seconds per pair of each step after a warm-up, and the peak rise."""
    import torch
    import torch.nn.functional as F

    from rmspec.inference.packed_forward import packed_head_outputs
    from rmspec.inference.prefix_mask import Group, pack_groups

    torch.set_num_threads(1)
    base.choose_attention()
    m = base.model()
    g = torch.Generator().manual_seed(length)
    ids = lambda n: torch.randint(1, base.VOCAB, (n,), generator=g).tolist()  # noqa: E731
    prompt, chosen, rejected = ids(length - 2 * response), ids(response), ids(response)
    if packed:
        rows = pack_groups([Group(prompt, [chosen, rejected])], 0)
        forward = lambda: packed_head_outputs(m, rows)[:, 0]  # noqa: E731
        tokens = rows.real_tokens
    else:
        batch = torch.tensor([prompt + chosen, prompt + rejected])
        forward = lambda: m(input_ids=batch).logits[:, 0]  # noqa: E731
        tokens = batch.numel()
    before = base.rss_bytes()
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        scores = forward()
        loss = -F.logsigmoid(scores[0] - scores[1])
        loss.backward()
        m.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    return {"tokens": tokens, "s_per_pair": [round(x, 2) for x in times[1:]], "peak_mib": round(peak / 2**20, 1)}


def cmd_speed(args) -> None:
    import subprocess

    for length in args.lengths:
        for packed in (True, False):
            out = (
                subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "_one",
                        str(length),
                        str(args.response),
                        str(args.repeats),
                        str(int(packed)),
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            r = json.loads(out)
            emit(
                {
                    "part": "speed",
                    "length": length,
                    "response": args.response,
                    "layout": "prompt-once row" if packed else "two sequences (TRL)",
                    "attention": os.environ.get("BENCH_ATTENTION", "blocks") if packed else "sdpa causal",
                    **r,
                    "median_s_per_pair": statistics.median(r["s_per_pair"]),
                }
            )


def main() -> None:
    if sys.argv[1] == "_one":
        length, response, steps, packed = map(int, sys.argv[2:6])
        print(json.dumps(two_sequences(length, response, steps, bool(packed))))
        return
    p = argparse.ArgumentParser()
    p.add_argument("part", choices=["plan", "cap", "speed"])
    p.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--cap-mib", type=float, default=1024)
    p.add_argument("--cap-lo", type=int, default=4096)
    p.add_argument("--cap-hi", type=int, default=8192)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--response", type=int, default=256)
    p.add_argument(
        "--tensors", action="store_true", help="plan: also the live tensor peak (MemTracker), see tensor_rank"
    )
    p.add_argument("--census", action="store_true", help="with --tensors: saved tensors by autograd node")
    p.add_argument("--degrees", type=int, nargs="+", default=[1, 2], choices=[1, 2])
    p.add_argument(
        "--mmap-threshold",
        type=int,
        default=0,
        help="plan and cap: fix glibc's mmap threshold (bytes) in the rank processes, so freed tensors go back to the "
        "system at once instead of staying in the heap (the allocator's slack in ru_maxrss)",
    )
    p.add_argument(
        "--attention",
        choices=["blocks", "masked"],
        default="blocks",
        help="the packed attention of every rmspec forward (bench/context_parallel.py's choose_attention): by blocks, "
        "rmspec's default on CPU for rows over one block, or through the whole row's mask, as before",
    )
    args = p.parse_args()
    os.environ["BENCH_ATTENTION"] = args.attention  # read in every (spawned) process
    if args.mmap_threshold:  # read by glibc at the start of each (spawned) rank process
        os.environ["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
    emit({"part": args.part, "start": " ".join(sys.argv[1:]), "uptime": os.popen("uptime").read().strip()})
    {"plan": cmd_plan, "cap": cmd_cap, "speed": cmd_speed}[args.part](args)
    emit({"part": args.part, "end": True, "uptime": os.popen("uptime").read().strip()})


if __name__ == "__main__":
    main()
