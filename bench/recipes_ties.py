"""Ties data (rmspec/data/demo/ties.jsonl, about 20% rows annotated tie: true): Davidson (ties
trained, nu learned) vs dropping ties (ties: reject, the default), same optimizer steps, quickstart
MiniLM on CPU. Held-out (ties_heldout.jsonl): accuracy on the non-tie pairs, and for Davidson the
tie calibration (mean P(tie) on tie vs non-tie pairs, Brier score) at the learned nu.

    .venv/bin/python bench/recipes_ties.py --steps 40 --seeds 0 --out bench/results/recipes_ties.md
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rmspec" / "data" / "demo"
SPEC = """version: 1
name: {name}
model: {{name_or_path: sentence-transformers/all-MiniLM-L6-v2}}
data:
  source: {{kind: files, paths: [{data}]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: null}}
approach: {{kind: bradley_terry, ties: {ties}{tie_lr}}}
training: {{max_steps: {steps}, learning_rate: 5.0e-5, global_batch_size: 16, max_length: 192, logging_steps: 10,
           seed: {seed}, group_by_length: false}}
hardware: {{device: cpu}}
eval: {{validation: false, benchmarks: []}}
output: {{dir: {out}}}
"""


def rmspec(*args, cwd):
    done = subprocess.run([sys.executable, "-m", "rmspec", *map(str, args)], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    return done


def heldout(run: Path, work: Path) -> dict[str, float]:
    import torch

    from rmspec.train.objectives.ties import tie_calibration

    rows = [json.loads(line) for line in (DEMO / "ties_heldout.jsonl").read_text().splitlines()]
    src = work / "heldout.jsonl"
    src.write_text("".join(json.dumps({k: r[k] for k in ("prompt", "chosen", "rejected")}) + "\n" for r in rows))
    out = work / "scored.jsonl"
    rmspec("score", run / "model", src, "--out", out, "--overwrite", cwd=work)
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    c = torch.tensor([s["reward_chosen"] for s in scored])
    r = torch.tensor([s["reward_rejected"] for s in scored])
    tie = torch.tensor([bool(x.get("tie")) for x in rows])
    res = {"accuracy_non_tie": float((c[~tie] > r[~tie]).float().mean())}
    nu = None
    for line in (run / "metrics.jsonl").read_text().splitlines():
        nu = json.loads(line).get("train/rm/tie_nu", nu)
    if nu is not None:
        cal = tie_calibration(c, r, tie, math.log(nu))
        res.update(
            nu=nu,
            p_tie_on_ties=cal["p_tie_on_ties"],
            p_tie_on_non_ties=cal["p_tie_on_non_ties"],
            tie_brier=cal["tie_brier"],
            tie_rate=cal["tie_rate"],
        )
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--arms", nargs="+", default=["reject", "davidson"], choices=["reject", "davidson"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tie-lr", type=float, help="approach.tie_learning_rate for davidson (default: 100 x lr)")
    args = ap.parse_args()
    results: dict[str, list[dict]] = {arm: [] for arm in args.arms}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for seed in args.seeds:
            for ties in results:
                name = f"{ties}-{seed}"
                spec = work / f"{name}.yaml"
                spec.write_text(
                    SPEC.format(
                        name=name,
                        data=DEMO / "ties.jsonl",
                        ties=ties,
                        steps=args.steps,
                        tie_lr=f", tie_learning_rate: {args.tie_lr}" if args.tie_lr and ties == "davidson" else "",
                        seed=seed,
                        out=work / "runs" / name,
                    )
                )
                rmspec("run", spec, cwd=work)
                results[ties].append(heldout(work / "runs" / name, work))
                print(ties, seed, results[ties][-1], flush=True)
    lines = [
        "# Recipes: ties (Davidson vs dropping ties)",
        "",
        f"`.venv/bin/python bench/recipes_ties.py --steps {args.steps} --seeds {' '.join(map(str, args.seeds))}"
        + (f" --tie-lr {args.tie_lr}`" if args.tie_lr else "`")
        + f" (MiniLM-L6, CPU, global batch 16, lr 5e-5, {args.steps} optimizer steps; train ties.jsonl, "
        "held-out ties_heldout.jsonl)",
        "",
        "| ties | held-out accuracy (non-tie pairs) | nu | P(tie) on ties | P(tie) on non-ties | tie Brier | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for ties, rows in results.items():

        def fmt(key, rows=rows):  # this iteration's rows, bound (B023)
            vals = [r[key] for r in rows if key in r]
            if not vals:
                return "-"
            se = statistics.stdev(vals) / len(vals) ** 0.5 if len(vals) > 1 else None
            return f"{statistics.mean(vals):.3f}" + (f" ± {se:.3f}" if se is not None else "")

        lines.append(
            f"| {ties} | {fmt('accuracy_non_tie')} | {fmt('nu')} | {fmt('p_tie_on_ties')} | "
            f"{fmt('p_tie_on_non_ties')} | {fmt('tie_brier')} | {len(rows)} |"
        )
    lines += [
        "",
        "`reject` trains on the non-tie rows only (ties are rejects, reason `tie`); `davidson` on all "
        "rows, a tie row's loss -log P(tie). ± is the standard error over seeds (none with one seed).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
