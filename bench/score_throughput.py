"""Benchmark: `rmspec score` rows/s on 20,000 rows, with the padding share.

Builds 20,000 prompt + response rows from the demo preference data (rmspec/data/demo/
preferences.jsonl: each prompt with its chosen and its rejected response, repeated with a row
number appended), runs `rmspec score --json` on them as a user would (a subprocess, model load
included in the wall time, reported separately), and reports rows/s and the padding share of the
length-sorted batches inside each chunk, next to the share that batches in file order would have.
Model: the trained quickstart run if one exists, else the packaged all-MiniLM-L6-v2 with a seeded
fresh head (same cost per row).

    HF_HUB_OFFLINE=1 python bench/score_throughput.py [--rows 20000] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--chunk-rows", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--write", action="store_true", help="write bench/results/score_throughput.md")
    args = parser.parse_args()

    from serve_load import model_folder

    tmp = Path(tempfile.mkdtemp(prefix="score_bench_"))
    model_dir, model_note = model_folder(tmp)
    pairs = [json.loads(x) for x in (REPO / "rmspec/data/demo/preferences.jsonl").read_text().splitlines()]
    rows = []
    while len(rows) < args.rows:
        for p in pairs:
            for side in ("chosen", "rejected"):
                if len(rows) < args.rows:
                    rows.append({"id": len(rows), "prompt": p["prompt"], "response": f"{p[side]} ({len(rows)})"})
    src = tmp / "rows.jsonl"
    print(f"working in {tmp} (progress: {tmp / 'scored.jsonl.progress.json'})", flush=True)
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))

    # Padding share of batches in file order (what a plain DataLoader does), for comparison.
    from rmspec.inference.engine import RewardEngine

    engine = RewardEngine.load(model_dir)
    lengths = [len(e.ids) for e in engine.encode([(r["prompt"], r["response"]) for r in rows])]
    bs = args.batch_size
    in_order = sum(max(lengths[s : s + bs]) * len(lengths[s : s + bs]) for s in range(0, len(lengths), bs))
    file_order_share = 1 - sum(lengths) / in_order

    load_before = os.getloadavg()
    started = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmspec",
            "score",
            model_dir,
            str(src),
            "--out",
            str(tmp / "scored.jsonl"),
            "--batch-size",
            str(bs),
            "--chunk-rows",
            str(args.chunk_rows),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=True,
    )
    wall = time.perf_counter() - started
    summary = json.loads(out.stdout)
    load_after = os.getloadavg()
    threads = f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} " if os.environ.get("OMP_NUM_THREADS") else ""
    lines = [
        "# rmspec score throughput",
        "",
        f"Command: `HF_HUB_OFFLINE=1 {threads}python bench/score_throughput.py --rows {args.rows}"
        + (" --write`" if args.write else "`"),
        "",
        f"Machine: {os.cpu_count()} CPU cores shared with other engineers' work (no GPU); 1-minute load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after.",
        f"Model: {model_note}. Rows: {args.rows} prompt + response rows from the demo preference data, "
        f"{sum(lengths) / len(lengths):.0f} tokens on average (max {max(lengths)}).",
        f"`rmspec score --batch-size {bs} --chunk-rows {args.chunk_rows}` (JSONL in, JSONL out, every input column kept).",
        "",
        "| rows scored | rejected | scoring time | rows/s (scoring) | wall time incl. start-up | padding share, length-sorted | padding share, file order |",
        "|---|---|---|---|---|---|---|",
        f"| {summary['scored']} | {summary['rejected']} | {summary['seconds']:.1f} s | {summary['rows_per_second']:.1f} | {wall:.1f} s | "
        f"{summary['padding_share']:.1%} | {file_order_share:.1%} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (REPO / "bench" / "results" / "score_throughput.md").write_text(text)


if __name__ == "__main__":
    main()
