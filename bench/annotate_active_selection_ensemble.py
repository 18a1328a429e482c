"""Active selection from an ensemble M0: members' disagreement vs |margin| vs random (simulated annotation).

    python bench/annotate_active_selection_ensemble.py [--members 4] [--arms ensemble,margin,random]
        [--seeds 0,1,2] [--seed-set 200] [--budget 200] [--pool 1500] [--epochs 2]
        [--out bench/results/annotate_active_selection_ensemble.md]

As bench/annotate_active_selection.py (same data, seed set, pool file, retraining and held-out set),
except that M0 is an ensemble (approach.ensemble: {members: N, bootstrap: true}) trained by rmspec's
trainer and saved as `rmspec run` saves it, and the pool is scored through
rmspec.annotate.select.scored_pairs (what `annotate export --select uncertain` runs). Arms:
`ensemble` (the shipped rule for an ensemble: largest std / |mean margin|), `margin` (smallest
|mean margin| of the same model, so only the rule differs), `raw_std` (largest std alone) and `random`.
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
from pathlib import Path

from annotate_active_selection import REPO, SPEC, held_out_accuracy, parser, run_seeds, train, write_pool

ARMS = ("ensemble", "margin", "raw_std", "random")


def one_seed(seed: int, prepared, canonical: dict, args, work: Path) -> dict:
    """M0 an ensemble (approach.ensemble, bootstrap); its picks by the shipped `uncertain` rule
    (std / |mean margin|), by |mean margin| alone, optionally by the raw std, or at random."""
    from recipes_odin import train_and_save

    from rmspec.annotate.select import load_engine, margins, scored_pairs, select
    from rmspec.annotate.source import load_source
    from rmspec.spec import load_spec

    spec = load_spec(SPEC).spec
    train_rows = prepared.train
    ids = list(train_rows["id"])
    order = list(range(len(ids)))
    random.Random(seed).shuffle(order)
    seed_idx, pool_idx = order[: args.seed_set], order[args.seed_set : args.seed_set + args.pool]
    ensemble = f"approach={{kind: bradley_terry, ensemble: {{members: {args.members}, bootstrap: true}}}}"
    loaded = load_spec(SPEC, sets=[ensemble, "eval.benchmarks=[]"])
    steps = args.epochs * -(-args.seed_set // spec.training.global_batch_size)  # the plain M0's steps
    t0 = time.time()
    m0_dir, _, _ = train_and_save(loaded, steps, work / f"m0-{seed}", prepared, train_rows.select(seed_idx))
    t_m0 = time.time() - t0
    engine = load_engine(m0_dir)
    val = [canonical[i] for i in prepared.validation["id"]]
    held = margins(engine, [{"prompt": r["prompt"], "first": r["chosen"], "second": r["rejected"]} for r in val])
    source = load_source(write_pool(work / f"pool-{seed}.jsonl", pool_idx, ids, canonical))
    t0 = time.time()
    scores, spread = scored_pairs(engine, source.items)  # what `annotate export --select uncertain` computes
    t_score = time.time() - t0
    assert spread is not None, "the saved M0 has no ensemble members"
    picks = {
        "ensemble": select(source.items, "uncertain", args.budget, scores=scores, uncertainty=spread),
        "margin": select(source.items, "uncertain", args.budget, scores=scores),
        "random": select(source.items, "random", args.budget, seed=seed),
    }
    by_std = sorted(range(len(spread)), key=lambda i: (-spread[i], i))[: args.budget]
    picks["raw_std"] = [{"index": i, "id": source.items[i]["id"]} for i in by_std]
    picks = {arm: picks[arm] for arm in args.arms.split(",")}
    result = {
        "seed": seed,
        "members": args.members,
        "m0_steps": steps,
        "m0_accuracy": sum(a > b for a, b in held) / len(held),
        "m0_seconds": round(t_m0, 1),
        "score_seconds": round(t_score, 1),
        "pool_m0_accuracy": sum(a > b for a, b in scores) / len(scores),
        "pool_median_std": sorted(spread)[len(spread) // 2],
    }
    if "ensemble" in picks and "margin" in picks:
        shared = {r["id"] for r in picks["ensemble"]} & {r["id"] for r in picks["margin"]}
        result["ensemble_margin_overlap"] = len(shared) / args.budget
    pool_pos = {ids[i]: i for i in pool_idx}
    for arm, chosen in picks.items():
        at = [r["index"] for r in chosen]
        result[f"{arm}_m0_right_on_picks"] = sum(scores[i][0] > scores[i][1] for i in at) / len(at)
        result[f"{arm}_median_abs_margin"] = sorted(abs(scores[i][0] - scores[i][1]) for i in at)[len(at) // 2]
        result[f"{arm}_median_std"] = sorted(spread[i] for i in at)[len(at) // 2]
        t0 = time.time()
        trainer, _ = train(
            spec, train_rows.select(seed_idx + [pool_pos[r["id"]] for r in chosen]), work / arm, args.epochs
        )
        result[f"{arm}_accuracy"] = held_out_accuracy(trainer.model, prepared.validation, True)
        result[f"{arm}_seconds"] = round(time.time() - t0, 1)
    print(json.dumps(result), flush=True)
    return result


def write(path: Path, results: list[dict], args, sizes, load_before, load_after, seconds: float) -> None:  # noqa: ARG001
    import numpy as np

    # Arms run on every seed are the table's columns; an arm run on some seeds only is listed below it.
    arms = [a for a in ARMS if all(f"{a}_accuracy" in r for r in results)]
    partial = [a for a in ARMS if a not in arms and any(f"{a}_accuracy" in r for r in results)]
    col = lambda k: np.array([r[k] for r in results])  # noqa: E731
    ms = lambda x: f"{x.mean():.3f} ± {x.std(ddof=1) / len(x) ** 0.5:.3f}" if len(x) > 1 else f"{x.mean():.3f}"  # noqa: E731
    p, n = col("random_accuracy").mean() if "random" in arms else 0.8, sizes[1]
    se = (p * (1 - p) / n) ** 0.5
    lines = [
        "# Active selection from an ensemble: members' disagreement vs |margin| vs random (simulated annotation)",
        "",
        f"Command: `nice -n 10 python bench/annotate_active_selection_ensemble.py --members {args.members} --arms "
        f"{','.join(arms)} --seeds {','.join(str(r['seed']) for r in results)} --seed-set {args.seed_set} --budget {args.budget} "
        f"--pool {args.pool} --epochs {args.epochs}` (each seed appends to `{Path(args.out).with_suffix('.jsonl').name}`; "
        "this table holds every seed run with these settings).",
        "",
        f"Machine: {os.cpu_count()} CPU cores shared with other engineers' tests ({platform.machine()}); load "
        "average per seed (before, after): "
        + ", ".join(f"seed {r['seed']}: {r['load_before']}, {r['load_after']}" for r in results)
        + f". The last invocation took {seconds / 60:.1f} min.",
        f"Data: the quickstart demo preferences, {sizes[0]} training pairs; held-out = the grouped validation split "
        f"({sizes[1]} pairs, never selected from). Per seed: a random seed set of {args.seed_set} pairs trains M0, "
        f"an ensemble of {args.members} bootstrap heads on the packaged MiniLM (`approach.ensemble: {{members: "
        f"{args.members}, bootstrap: true}}`, quickstart settings, {results[0]['m0_steps']} steps = {args.epochs} "
        "epochs of the seed set), saved as `rmspec run` saves it. M0 scores a pool of "
        f"{args.pool} other pairs through `rmspec.annotate.select.scored_pairs` (the code behind `annotate export "
        f"--select uncertain`). {args.budget} pairs are picked per arm:",
        "- **ensemble**: `select(..., 'uncertain', uncertainty=std)`, the shipped rule for an ensemble: largest "
        "members' std of the margin / |mean margin|;",
        "- **margin**: `select(..., 'uncertain')` on the same ensemble's mean reward: smallest |mean margin| (so the "
        "two arms differ only in the selection rule);",
        "- **raw_std** (if listed): largest members' std alone; **random**: a seeded sample.",
        f"Each arm then trains a fresh plain MiniLM (quickstart settings, training seed 42, {args.epochs} epochs) on "
        "seed set + picks with their known labels; held-out pair accuracy below.",
        "",
        "| seed | M0 held-out | M0 right on pool | ensemble/margin picks shared | "
        + " | ".join(f"{a}: M0 right on picks" for a in arms)
        + " | "
        + " | ".join(f"{a} held-out" for a in arms)
        + " |",
        "|---" * (4 + 2 * len(arms)) + "|",
    ]
    for r in results:
        lines.append(
            f"| {r['seed']} | {r['m0_accuracy']:.3f} | {r['pool_m0_accuracy']:.3f} | "
            f"{r.get('ensemble_margin_overlap', float('nan')):.2f} | "
            + " | ".join(f"{r[f'{a}_m0_right_on_picks']:.3f}" for a in arms)
            + " | "
            + " | ".join(f"{r[f'{a}_accuracy']:.3f}" for a in arms)
            + " |"
        )
    lines.append(
        f"| **mean ± se** | {ms(col('m0_accuracy'))} | {ms(col('pool_m0_accuracy'))} | | "
        + " | ".join(ms(col(f"{a}_m0_right_on_picks")) for a in arms)
        + " | "
        + " | ".join(f"**{ms(col(f'{a}_accuracy'))}**" for a in arms)
        + " |"
    )
    lines += ["", "Paired differences of held-out accuracy (same seed set, same training seed), mean ± se over seeds:"]
    for a, b in [(x, y) for i, x in enumerate(arms) for y in arms[i + 1 :]]:
        d = col(f"{a}_accuracy") - col(f"{b}_accuracy")
        lines.append(
            f"- {a} - {b}: {'+' if d.mean() >= 0 else ''}{ms(d)} (per seed: {', '.join(f'{x:+.3f}' for x in d)})"
        )
    for a in partial:
        got = [r for r in results if f"{a}_accuracy" in r]
        acc = {r["seed"]: r[f"{a}_accuracy"] for r in got}
        versus = [f"{b} " + " ".join(f"{acc[r['seed']] - r[f'{b}_accuracy']:+.3f}" for r in got) for b in arms]
        right = ", ".join(f"{r[f'{a}_m0_right_on_picks']:.3f}" for r in got)
        lines.append(
            f"- {a} (run on seed {', '.join(str(r['seed']) for r in got)} only): held-out "
            f"{', '.join(f'{x:.3f}' for x in acc.values())}; minus {'; '.join(versus)}; M0 right on its picks {right}"
        )
    lines += [
        "",
        f"For scale: one held-out accuracy of ~{p:.2f} on {n} pairs has a binomial standard error of {se:.3f} "
        f"(a difference of two independent ones: ~{se * 2**0.5:.3f}); ± above is the standard error over "
        f"{len(results)} seeds. Median |mean margin| / members' std of the picks: "
        + "; ".join(
            f"{a} {np.median([r[f'{a}_median_abs_margin'] for r in results if f'{a}_accuracy' in r]):.3f} / "
            f"{np.median([r[f'{a}_median_std'] for r in results if f'{a}_accuracy' in r]):.3f}"
            for a in arms + partial
        )
        + f" (pool median std {np.median(col('pool_median_std')):.3f}).",
        "",
        "Timings per seed (s, contended): "
        + "; ".join(
            f"seed {r['seed']}: M0 {r['m0_seconds']}, scoring {r['score_seconds']}, "
            + ", ".join(f"{a} {r[f'{a}_seconds']}" for a in ARMS if f"{a}_seconds" in r)
            for r in results
        )
        + ".",
        "",
        "Raw results (JSON lines):",
        "",
        "```",
        *[json.dumps(r) for r in results],
        "```",
        "",
    ]
    path.write_text("\n".join(lines))
    print("\n".join(lines))


def main() -> None:
    cli = parser()
    cli.add_argument("--members", type=int, default=4)
    cli.add_argument("--arms", default="ensemble,margin,random", help="any of ensemble, margin, raw_std, random")
    cli.set_defaults(out=str(REPO / "bench" / "results" / "annotate_active_selection_ensemble.md"))
    args = cli.parse_args()
    # The arm set is not a setting: seeds run with different --arms share the table's common arms.
    settings = {k: getattr(args, k) for k in ("seed_set", "budget", "pool", "epochs", "members")}
    run_seeds(args, one_seed, write, settings)


if __name__ == "__main__":
    main()
