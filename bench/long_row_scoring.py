"""Scoring long rows in one process: batches bounded by their padded mask (rmspec.inference.batches) against the
old cut (every eval.batch_size rows of the length-sorted order), side by side in one run.

Each cell runs in a fresh process (its own peak RSS): the issue-49 bench model (Llama-shaped, 4 layers, hidden
256, 8 heads, 4 key/value heads, fp32, random weights) scores ``--rows`` rows whose lengths are drawn uniformly
from [--min-len, --max-len] (seeded), at eval.batch_size 32 (the spec's default), through
rmspec.inference.scoring.score_token_ids. The two modes score the same rows; the table gives the time, the peak
RSS and the largest score difference between the modes.

    OMP_NUM_THREADS=1 .venv/bin/python bench/long_row_scoring.py --seeds 0 1 --rows 12 --min-len 1024 --max-len 12288

Rows are appended to bench/results/long_row_scoring.jsonl with the load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "long_row_scoring.jsonl"


def cell(mode: str, seed: int, rows: int, low: int, high: int, batch_size: int) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from rmspec.inference import batches
    from rmspec.inference.scoring import score_token_ids

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=1000,
        max_position_embeddings=high + 1,
        num_labels=1,
        pad_token_id=0,
        attn_implementation="sdpa",
    )
    model = LlamaForSequenceClassification(config).eval()
    rng = random.Random(seed)
    lengths = [rng.randint(low, high) for _ in range(rows)]
    sequences = [[rng.randint(1, 999) for _ in range(n)] for n in lengths]
    if mode == "unbounded":
        batches.MASK_ELEMENTS = float("inf")  # type: ignore[assignment]  # the cut before the mask bound
    cut = batches.length_batches(lengths, batch_size)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    scores = score_token_ids(model, sequences, 0, batch_size=batch_size)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "mode": mode,
        "seed": seed,
        "rows": rows,
        "tokens": sum(lengths),
        "batches": [len(b) for b in cut],
        "seconds": round(seconds, 2),
        "peak_mib": round(peak / 1024),
        "rise_mib": round((peak - before) / 1024),
        "scores": scores,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--min-len", type=int, default=1024)
    parser.add_argument("--max-len", type=int, default=12288)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cell", nargs=2, metavar=("MODE", "SEED"))
    args = parser.parse_args()
    if args.cell:
        mode, seed = args.cell
        print(json.dumps(cell(mode, int(seed), args.rows, args.min_len, args.max_len, args.batch_size)))
        return
    out = []
    for seed in args.seeds:
        pair = {}
        for mode in ("bounded", "unbounded"):
            load = os.getloadavg()[0]
            done = subprocess.run(
                [sys.executable, __file__, "--cell", mode, str(seed), "--rows", str(args.rows), "--min-len",
                 str(args.min_len), "--max-len", str(args.max_len), "--batch-size", str(args.batch_size)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row.update(load_before=round(load, 2), load_after=round(os.getloadavg()[0], 2))
            pair[mode] = row
        diff = max(abs(a - b) for a, b in zip(pair["bounded"]["scores"], pair["unbounded"]["scores"]))
        for mode, row in pair.items():
            row["max_score_diff"] = diff
            print(
                f"seed {seed} {mode:9s} batches {row['batches']}  {row['seconds']:7.1f} s  peak {row['peak_mib']:6d} "
                f"MiB (rise {row['rise_mib']})  max score diff {diff:.2e}  load {row['load_before']}->{row['load_after']}"
            )
            out.append({k: v for k, v in row.items() if k != "scores"})
    with RESULTS.open("a") as f:
        for row in out:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
