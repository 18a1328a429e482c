"""Does an ensemble's disagreement (approach.ensemble) say where the reward model is wrong?

    python bench/recipes_ensemble.py [--seeds 0] [--members 4] [--steps 40] [--out bench/results/recipes_ensemble.md]

Data: the quickstart spec's demo preferences (its grouped 10% validation split is the held-out set).
Model: the packaged all-MiniLM-L6-v2, quickstart settings (batch 16, lr 1e-4 linear), `--steps`
optimizer steps (short, so the model still misranks a share of the held-out pairs), trained by
rmspec's trainer with approach.ensemble {members: N, bootstrap: true}, saved as `rmspec run` saves it
(mean head + ensemble_heads.safetensors) and scored through rmspec.annotate.select.scored_pairs (the
code behind `annotate export --select uncertain`: rmspec.inference with the members attached).

Per held-out pair: the mean reward's margin, and the members' std of the margin (disagreement).
Reported: AUROC (sklearn roc_auc_score) of the std for telling misranked pairs (mean margin <= 0)
from correctly ranked ones, beside the AUROC of -|margin| (the single model's own uncertainty, what
`--select uncertain` uses without an ensemble) and of std / |margin| (both); and the held-out
accuracy of the ensemble's mean vs its members.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
SPEC = REPO / "specs" / "quickstart.yaml"


def figures(folder: Path, rows: list[dict]) -> dict:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from rmspec.annotate.select import load_engine, scored_pairs
    from rmspec.inference.ensemble import pair_members

    engine = load_engine(folder)
    items = [{"prompt": r["prompt"], "first": r["chosen"], "second": r["rejected"]} for r in rows]
    scores, spread = scored_pairs(engine, items)
    first, second = pair_members(
        engine, [i["prompt"] for i in items], [i["first"] for i in items], [i["second"] for i in items]
    )
    margin = np.array([a - b for a, b in scores])
    std = np.array(spread)
    wrong = margin <= 0
    member_acc = (np.array(first) > np.array(second)).mean(axis=0)
    return {
        "pairs": len(rows),
        "accuracy": float(1 - wrong.mean()),
        "misranked": int(wrong.sum()),
        "member_accuracy": [round(float(a), 4) for a in member_acc],
        "auroc_std": float(roc_auc_score(wrong, std)),
        "auroc_neg_abs_margin": float(roc_auc_score(wrong, -np.abs(margin))),
        "auroc_std_over_margin": float(roc_auc_score(wrong, std / (np.abs(margin) + 1e-9))),
        "std_wrong": float(std[wrong].mean()),
        "std_right": float(std[~wrong].mean()),
    }


def main() -> None:
    from recipes_odin import train_and_save

    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "recipes_ensemble.md"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets
    import transformers

    from rmspec.spec import load_spec

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    raw = Path(args.out).with_suffix(".jsonl")
    start, load_before = time.time(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rmspec-ens-") as tmp:
        prepared = None
        for seed in [int(s) for s in args.seeds.split(",")]:
            loaded = load_spec(
                SPEC,
                sets=[
                    f"approach={{kind: bradley_terry, ensemble: {{members: {args.members}}}}}",
                    f"training.seed={seed}",
                    "eval.benchmarks=[]",
                ],
            )
            folder, prepared, seconds = train_and_save(loaded, args.steps, Path(tmp) / f"ens-{seed}", prepared)
            validation = [prepared.validation[i] for i in range(len(prepared.validation))]
            row = {
                "seed": seed,
                "members": args.members,
                "steps": args.steps,
                "train_seconds": round(seconds, 1),
                **figures(folder, validation),
            }
            print(json.dumps(row), flush=True)
            with raw.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
    write(Path(args.out), raw, args, load_before, os.getloadavg()[0], time.time() - start)


def write(path: Path, raw: Path, args, load_before: float, load_after: float, seconds: float) -> None:
    import numpy as np

    rows = {}
    for line in raw.read_text().splitlines():
        r = json.loads(line)
        if (r["members"], r["steps"]) == (args.members, args.steps):
            rows[r["seed"]] = r
    got = [rows[s] for s in sorted(rows)]
    lines = [
        "# Ensemble disagreement as an error detector (demo preferences)",
        "",
        f"Command: `python bench/recipes_ensemble.py --seeds {','.join(str(r['seed']) for r in got)} "
        f"--members {args.members} --steps {args.steps}` (runs append to `{raw.name}`).",
        "",
        __doc__.split("\n\n", 2)[2].strip(),
        "",
        f"Machine: {os.cpu_count()} CPU cores shared with other agents ({platform.machine()}), load average "
        f"{load_before:.1f} before, {load_after:.1f} after; the last invocation took {seconds / 60:.1f} min.",
        "",
        "| seed | held-out acc. (mean) | members' acc. | misranked | AUROC std | AUROC -abs(margin) | "
        "AUROC std/abs(margin) | mean std: wrong / right |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in got:
        lines.append(
            f"| {r['seed']} | {r['accuracy']:.3f} | {', '.join(f'{a:.3f}' for a in r['member_accuracy'])} | "
            f"{r['misranked']} of {r['pairs']} | {r['auroc_std']:.3f} | {r['auroc_neg_abs_margin']:.3f} | "
            f"{r['auroc_std_over_margin']:.3f} | {r['std_wrong']:.3f} / {r['std_right']:.3f} |"
        )
    if len(got) > 1:
        se = lambda k: np.std([r[k] for r in got], ddof=1) / len(got) ** 0.5  # noqa: E731
        mean = lambda k: np.mean([r[k] for r in got])  # noqa: E731
        lines.append(
            f"| **mean ± se** | {mean('accuracy'):.3f} ± {se('accuracy'):.3f} | | | "
            f"{mean('auroc_std'):.3f} ± {se('auroc_std'):.3f} | {mean('auroc_neg_abs_margin'):.3f} ± "
            f"{se('auroc_neg_abs_margin'):.3f} | {mean('auroc_std_over_margin'):.3f} ± {se('auroc_std_over_margin'):.3f} | |"
        )
    k = got[0]["misranked"] if got else 0
    lines += [
        "",
        f"With about {k} misranked pairs per seed an AUROC has a standard error of roughly "
        f"{(1 / (12 * max(k, 1))) ** 0.5:.2f} (Hanley-McNeil at 0.5, about this size of positives): "
        "differences below that are noise.",
        "",
        "Raw results (JSON lines):",
        "",
        "```",
    ]
    lines += [json.dumps(r) for r in got] + ["```", ""]
    path.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
