"""Issue 49's acceptance figures on this CPU, with bench/context_parallel.py's model and measurement.

1. plan: the plan's activation memory per rank (rmspec.plan.memory.activation_bytes and packed_mask_bytes
   for N = 1, rmspec.plan.context_parallel.per_rank_memory's activations + gathered keys/values + mask slice
   for N = 2) beside the measured peak rise per rank, for each length;
2. cap: the longest prompt-once pair whose measured peak rise per rank stays under --cap-mib, N = 1 and
   N = 2, by bisection at 512-token resolution between --cap-lo and --cap-hi;
3. speed: one prompt-once packed row (prompt = length - 2 x response, two responses, rmspec's pack_groups
   and packed_head_outputs) against the two sequences TRL runs ([prompt+chosen, prompt+rejected] as a batch of
   2 through the model's own forward), forward + backward of the Bradley-Terry loss, N = 1, --repeats times.

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/context_parallel_acceptance.py plan --lengths 4096 8192
    ... cap --cap-mib 1024 --cap-lo 4096 --cap-hi 8192
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
        "plan_activations": act,
        "plan_mask": extra["mask"],
        "plan_gathered": extra["gathered"],
        "plan_total": adjusted.activations + adjusted.temporary,
    }


def measure(world: int, length: int, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return base.measure(world, length, steps, Path(tmp))


def cmd_plan(args) -> None:
    for length in args.lengths:
        for n in (1, 2):
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
    for n in (1, 2):
        lo, hi = args.cap_lo, args.cap_hi  # lo assumed under the cap, hi over it: checked first
        for length in (lo, hi):
            m = measure(n, length, args.steps)
            emit({"part": "cap", "cap_mib": args.cap_mib, **m, "under": m["peak_mib_per_rank"] < args.cap_mib})
        while hi - lo > 512:
            mid = (lo + hi) // 2 // 512 * 512
            m = measure(n, mid, args.steps)
            under = m["peak_mib_per_rank"] < args.cap_mib
            emit({"part": "cap", "cap_mib": args.cap_mib, **m, "under": under})
            lo, hi = (mid, hi) if under else (lo, mid)


def two_sequences(length: int, response: int, steps: int, packed: bool) -> dict:
    """In this process (one torch thread): seconds per pair of each step after a warm-up, and the peak rise."""
    import torch
    import torch.nn.functional as F

    from rmspec.inference.prefix_mask import Group, pack_groups, packed_head_outputs

    torch.set_num_threads(1)
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
    args = p.parse_args()
    emit({"part": args.part, "start": " ".join(sys.argv[1:]), "uptime": os.popen("uptime").read().strip()})
    {"plan": cmd_plan, "cap": cmd_cap, "speed": cmd_speed}[args.part](args)
    emit({"part": args.part, "end": True, "uptime": os.popen("uptime").read().strip()})


if __name__ == "__main__":
    main()
