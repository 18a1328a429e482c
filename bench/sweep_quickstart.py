"""`rmspec sweep` on the quickstart: learning rate and warmup, N trials x 2 seeds, median pruning.

The sweep optimises validation accuracy (the quickstart's validation split); the best trial and the
shipped defaults (enqueued as trial 0, so they run with the same seeds) are then compared on the held-out
benchmark file (rmspec/data/demo/benchmark_pairs.jsonl), which the search never saw. Time saved by
pruning: for each pruned trial, the mean wall time of a completed trial minus its own.

    python bench/sweep_quickstart.py --trials 8 --seeds 0 1 --max-steps 60 --out /tmp/sweep-bench

Writes OUT/summary.json and prints the markdown table of bench/results/sweep_quickstart.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rmspec" / "data" / "demo"
HELD_OUT = "benchmarks.benchmark_pairs.overall"  # the pairs benchmark is named by its file
DEFAULT_LR, DEFAULT_WARMUP = 1.0e-4, 0.05  # specs/quickstart.yaml

SPEC = """extends: {quickstart}
# extends: resolves the base's relative paths against this file: name the demo files absolutely
data: {{source: {{kind: files, paths: [{demo}/preferences.jsonl]}}}}
eval: {{benchmarks: [{{kind: pairs, path: {demo}/benchmark_pairs.jsonl}}]}}
training: {{max_steps: {max_steps}, eval_steps: {eval_steps}}}
sweep:
  space:
    training.learning_rate: {{kind: float, low: 1.0e-5, high: 1.0e-3, log: true}}
    training.warmup_ratio: {{kind: float, low: 0.0, high: 0.2}}
  objective: {{metric: validation.overall, direction: maximize}}
  sampler: {{kind: tpe, seed: 0}}
  pruner: {{kind: median, startup_trials: 2}}
  first_trials: [{{training.learning_rate: {lr}, training.warmup_ratio: {warmup}}}]
  trials: {trials}
  seeds: [{seeds}]
"""


def metric(results: dict, path: str) -> float:
    node = results
    for part in path.split("."):
        node = node[part]
    return float(node)


def mean_se(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], float("nan")
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--max-steps", type=int, default=180, help="the quickstart's epoch is 180 steps")
    parser.add_argument("--eval-steps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("/tmp/sweep-bench"))
    parser.add_argument(
        "--summarise-only", action="store_true", help="read OUT/sw as it is (a sweep still running or stopped)"
    )
    args = parser.parse_args()
    if args.summarise_only:
        print(table(summarise(args.out, exit_code=None, wall=None)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    spec = args.out / "sweep.yaml"
    spec.write_text(
        SPEC.format(
            quickstart=REPO / "specs" / "quickstart.yaml",
            demo=DEMO,
            max_steps=args.max_steps,
            eval_steps=args.eval_steps,
            lr=DEFAULT_LR,
            warmup=DEFAULT_WARMUP,
            trials=args.trials,
            seeds=", ".join(map(str, args.seeds)),
        )
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}
    start = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "sweep", str(spec), "-o", str(args.out / "sw")], env=env, cwd=args.out
    )
    wall = time.time() - start
    summary = summarise(args.out, done.returncode, wall)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(table(summary))


def summarise(out: Path, exit_code: int | None, wall: float | None) -> dict:
    record = json.loads((out / "sw" / "sweep.json").read_text())
    trials = []
    for t in record["trials"]:
        held = []
        for run in t["run_dirs"]:
            results = Path(run) / "results.json"
            if t["state"] == "complete" and results.exists():
                held.append(metric(json.loads(results.read_text()), HELD_OUT))
        trials.append({**t, "held_out": held})
    completed = [t for t in trials if t["state"] == "complete"]
    pruned = [t for t in trials if t["state"] == "pruned"]
    full = statistics.fmean(t["seconds"] for t in completed) if completed else float("nan")
    saved = sum(max(0.0, full - t["seconds"]) for t in pruned)
    best = record.get("best") or {}
    return {
        "command": " ".join(sys.argv),
        "exit_code": exit_code,
        "wall_seconds": wall,
        "trials": trials,
        "best_number": best.get("number"),
        "mean_completed_trial_seconds": full,
        "pruned": len(pruned),
        "pruning_saved_seconds": saved,
        "importances": record.get("importances"),
    }


def table(summary: dict) -> str:
    lines = [
        "| trial | lr | warmup | state | validation (objective) | held-out pairs (mean ± s.e.) | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in summary["trials"]:
        if t["state"] == "running":
            continue
        v = t["values"]
        held = f"{mean_se(t['held_out'])[0]:.4f} ± {mean_se(t['held_out'])[1]:.4f}" if t["held_out"] else "-"
        objective = f"{t['objective']:.4f}" if t["objective"] is not None else "-"
        if t["state"] == "pruned":  # sweep.json before last_reported: Optuna's value is the last report
            reported = t.get("last_reported") or {str(t["pruned_at_step"]): t["objective"]}
            value = reported[str(t["pruned_at_step"])]
            objective = f"- (eval/rm/accuracy {value:.4f} at step {t['pruned_at_step']}, first seed)"
        if t.get("stderr") is not None and t["state"] != "pruned":
            objective += f" ± {t['stderr']:.4f}"
        note = f" at step {t['pruned_at_step']}" if t["state"] == "pruned" else ""
        lines.append(
            f"| {t['number']}{' (defaults)' if t['number'] == 0 else ''}{' (best)' if t['number'] == summary['best_number'] else ''} "
            f"| {v.get('training.learning_rate', 0):.3g} | {v.get('training.warmup_ratio', 0):.3f} | {t['state']}{note} "
            f"| {objective} | {held} | {t['seconds'] or 0:.0f} |"
        )
    lines.append("")
    lines.append(
        f"wall time {(summary['wall_seconds'] or float('nan')) / 60:.1f} min; {summary['pruned']} trial(s) pruned; a completed trial took "
        f"{summary['mean_completed_trial_seconds']:.0f} s on average; pruning saved about "
        f"{summary['pruning_saved_seconds']:.0f} s; importances: {summary['importances']}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
