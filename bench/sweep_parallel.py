"""The same 4-trial sweep one trial at a time and two at a time (sweep.parallel: 2) on this machine.

The quickstart (MiniLM on the demo pairs) at --max-steps steps per trial, the random sampler with a fixed
seed (both sweeps try the same four learning rates), no pruning, one seed. Each sweep's wall time is
measured around `rmspec sweep`; the load average (1 min) before and after each is recorded, since other
work on the machine moves wall times. Runs alternate sequential / parallel for --repeats rounds.
Also reads each trial's estimated_seconds and measured seconds from sweep.json (the budget's check).

    python bench/sweep_parallel.py --max-steps 20 --repeats 1 --out /tmp/sweep-parallel

Writes OUT/summary.json and prints the markdown rows of bench/results/sweep_parallel.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rmspec" / "data" / "demo"

SPEC = """extends: {quickstart}
# extends: resolves the base's relative paths against this file: name the demo files absolutely
data: {{source: {{kind: files, paths: [{demo}/preferences.jsonl]}}}}
eval: {{benchmarks: []}}
training: {{max_steps: {max_steps}}}
output: {{report: [console]}}
sweep:
  space:
    training.learning_rate: {{kind: float, low: 1.0e-5, high: 1.0e-3, log: true}}
  objective: {{metric: validation.overall, direction: maximize}}
  sampler: {{kind: random, seed: 0}}
  trials: 4
  parallel: {parallel}
"""


def one_sweep(out: Path, parallel: int, max_steps: int) -> dict:
    folder = out / f"p{parallel}-{int(time.time())}"
    folder.mkdir(parents=True)
    spec = folder / "sweep.yaml"
    spec.write_text(
        SPEC.format(quickstart=REPO / "specs" / "quickstart.yaml", demo=DEMO, max_steps=max_steps, parallel=parallel)
    )
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "sweep", str(spec), "-o", str(folder / "sw")],
        cwd=folder,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    record = json.loads((folder / "sw" / "sweep.json").read_text())
    trials = record["trials"]
    return {
        "parallel": parallel,
        "wall_seconds": round(wall, 1),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "objectives": [t["objective"] for t in trials],
        "learning_rates": [t["values"]["training.learning_rate"] for t in trials],
        "trial_seconds": [t["seconds"] for t in trials],
        "estimated_seconds": [t["estimated_seconds"] for t in trials],
        "devices": [t["devices"] for t in trials],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/sweep-parallel"))
    parser.add_argument("--parallel-first", action="store_true", help="two at a time first in each round")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for _ in range(args.repeats):
        for parallel in (2, 1) if args.parallel_first else (1, 2):
            runs.append(one_sweep(args.out, parallel, args.max_steps))
            print(json.dumps(runs[-1]), flush=True)
    summary = {
        "machine": f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "max_steps": args.max_steps,
        "runs": runs,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    for parallel in (1, 2):
        walls = [r["wall_seconds"] for r in runs if r["parallel"] == parallel]
        se = statistics.stdev(walls) / math.sqrt(len(walls)) if len(walls) > 1 else float("nan")
        loads = [f"{r['load_before']:.1f}-{r['load_after']:.1f}" for r in runs if r["parallel"] == parallel]
        print(f"| {parallel} | {statistics.fmean(walls):.0f} ± {se:.0f} s | {', '.join(loads)} |")


if __name__ == "__main__":
    main()
