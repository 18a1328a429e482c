"""Does ODIN (approach.length_debias) take the length out of the reward? Plain Bradley-Terry vs ODIN.

    python bench/recipes_odin.py [--seeds 0,1] [--steps 90] [--arms bt,odin] [--odin "{lambda_ortho: 0.1}"]
        [--out bench/results/recipes_odin.md]

Training data: rmspec/data/demo/length_biased.jsonl (1,600 pairs; the chosen response is longer in
82% of them), the quickstart spec's data settings (pairs preset, 10% grouped validation split).
Held out: length_balanced_heldout.jsonl (400 pairs, chosen longer in 50%). Model: the packaged
all-MiniLM-L6-v2 with the quickstart training settings (batch 16, lr 1e-4 linear, max_length 256),
`--steps` optimizer steps, trained through rmspec's own trainer (rmspec.train.factory), saved as
`rmspec run` saves it (finalize_heads: ODIN keeps the quality head) and scored through
rmspec.inference (load_scorer), as `rmspec score` does.

Reported per arm and seed: held-out pair accuracy, and the Pearson correlation of the reward with
the response's token count over all 800 held-out responses (chosen and rejected), the figure the
ODIN paper reports (0.451 -> about -0.03 there, at a 0.9-point accuracy cost).
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
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
TRAIN = REPO / "rmspec" / "data" / "demo" / "length_biased.jsonl"
HELDOUT = REPO / "rmspec" / "data" / "demo" / "length_balanced_heldout.jsonl"


def load(approach: str, seed: int, train_file: Path = TRAIN):
    from rmspec.spec import load_spec

    return load_spec(
        SPEC,
        sets=[
            f"data.source.paths=[{train_file}]",
            f"approach={approach}",
            f"training.seed={seed}",
            "eval.benchmarks=[]",
        ],
    )


def train_and_save(loaded, steps: int, out: Path, prepared=None, rows=None):
    """rmspec's trainer on the spec; the model saved as `rmspec run` saves it; (folder, prepared)."""
    from transformers.trainer_utils import SaveStrategy

    from rmspec.data import prepare
    from rmspec.packaged import resolve_model_path
    from rmspec.train.arguments import build_training_arguments
    from rmspec.train.factory import build_trainer
    from rmspec.train.final_model import save_final_model
    from rmspec.train.heads import finalize_heads
    from rmspec.train.modeling import ensure_pad_token, load_model, load_tokenizer

    spec = loaded.spec
    tok = load_tokenizer(resolve_model_path(MODEL))
    ensure_pad_token(tok)
    if prepared is None:
        prepared = prepare(loaded, tok, cache_dir=out / "cache")
    model = load_model(resolve_model_path(MODEL), spec.approach, seed=spec.training.seed, tokenizer=tok)
    args = build_training_arguments(spec, None, out, has_validation=False, use_cpu=True)
    args.save_strategy = SaveStrategy.NO
    args.max_steps = steps
    args.report_to = []
    trainer = build_trainer(spec, model.model, tok, args, rows if rows is not None else prepared.train, None)
    t0 = time.time()
    trainer.train()
    seconds = time.time() - t0
    folder = out / "model"
    folder.parent.mkdir(parents=True, exist_ok=True)
    save_final_model(
        trainer,
        tok,
        folder,
        config_extra={"approach": "bradley_terry"},
        card="bench",
        finalize=lambda m: finalize_heads(m, spec.approach),
    )
    return folder, prepared, seconds


def heldout_figures(folder: Path, rows: list[dict]) -> dict:
    """Accuracy and reward-length Pearson on held-out pairs, scored through rmspec.inference."""
    import numpy as np

    from rmspec.inference.engine import load_scorer

    engine = load_scorer(folder)
    chosen, rejected = engine.score_pairs(
        [r["prompt"] for r in rows], [r["chosen"] for r in rows], [r["rejected"] for r in rows]
    )
    tok = engine.tokenizer
    n_c = [len(x) for x in tok([r["chosen"] for r in rows], add_special_tokens=False)["input_ids"]]
    n_r = [len(x) for x in tok([r["rejected"] for r in rows], add_special_tokens=False)["input_ids"]]
    rewards, lengths = np.array(chosen + rejected), np.array(n_c + n_r, dtype=float)
    right = np.array(chosen) > np.array(rejected)
    longer = np.array(n_c) > np.array(n_r)
    return {
        "accuracy": float(right.mean()),
        "reward_length_pearson": float(np.corrcoef(rewards, lengths)[0, 1]),
        "accuracy_chosen_longer": float(right[longer].mean()),
        "accuracy_chosen_shorter": float(right[~longer].mean()),
        "pairs": len(rows),
    }


ARMS = {"bt": "{kind: bradley_terry}", "odin": "{kind: bradley_terry, length_debias: {kind: odin}}"}


def arm_approach(arm: str, odin: str) -> tuple[str, str]:
    """(the arm's label in the table, its approach): `--odin` settings (e.g. smaller lambdas) name the arm."""
    if arm != "odin" or not odin:
        return arm, ARMS[arm]
    return f"odin {odin}", f"{{kind: bradley_terry, length_debias: {{kind: odin, {odin.strip().strip('{}')}}}}}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--arms", default="bt,odin")
    parser.add_argument("--odin", default="", help="ODIN settings in YAML flow, e.g. {lambda_ortho: 0.1}")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "recipes_odin.md"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    heldout = [json.loads(line) for line in HELDOUT.read_text().splitlines()]
    raw = Path(args.out).with_suffix(".jsonl")
    start, load_before = time.time(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rmspec-odin-") as tmp:
        prepared = None
        for seed in [int(s) for s in args.seeds.split(",")]:
            for name in args.arms.split(","):
                arm, approach = arm_approach(name, args.odin)
                out = Path(tmp) / f"{name}-{seed}"
                folder, prepared, seconds = train_and_save(load(approach, seed), args.steps, out, prepared)
                row = {
                    "arm": arm,
                    "seed": seed,
                    "steps": args.steps,
                    "train_seconds": round(seconds, 1),
                    **heldout_figures(folder, heldout),
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
        if r["steps"] == args.steps:
            rows[(r["arm"], r["seed"])] = r  # the latest run of (arm, seed) counts
    seeds = sorted({s for _, s in rows})
    lines = [
        "# ODIN length debiasing vs plain Bradley-Terry (demo length-biased data)",
        "",
        f"Command: `nice -n 10 python bench/recipes_odin.py --seeds {','.join(map(str, seeds))} --steps {args.steps}` "
        "(plus `--arms odin --odin SETTINGS` for an `odin {...}` arm below; each run appends to "
        f"`{raw.name}`; this table holds the latest run of every arm and seed at these settings).",
        "",
        __doc__.split("\n\n", 2)[2].strip(),
        "",
        f"Machine: {os.cpu_count()} CPU cores shared with other agents ({platform.machine()}), load average "
        f"{load_before:.1f} before, {load_after:.1f} after; the last invocation took {seconds / 60:.1f} min.",
        "",
        "| arm | seed | held-out accuracy | acc. (chosen longer) | acc. (chosen shorter) | reward-length Pearson | train s |",
        "|---|---|---|---|---|---|---|",
    ]
    for (arm, seed), r in sorted(rows.items()):
        lines.append(
            f"| {arm} | {seed} | {r['accuracy']:.3f} | {r['accuracy_chosen_longer']:.3f} | "
            f"{r['accuracy_chosen_shorter']:.3f} | {r['reward_length_pearson']:+.3f} | {r['train_seconds']} |"
        )
    for arm in sorted({a for a, _ in rows}):
        got = [r for (a, _), r in rows.items() if a == arm]
        acc = np.array([r["accuracy"] for r in got])
        rho = np.array([r["reward_length_pearson"] for r in got])
        sd = lambda x: f" ± {x.std(ddof=1) / len(x) ** 0.5:.3f}" if len(x) > 1 else ""  # noqa: E731
        lines.append(
            f"| **{arm} mean** | {len(got)} seeds | {acc.mean():.3f}{sd(acc)} | | | {rho.mean():+.3f}{sd(rho)} | |"
        )
    n = next(iter(rows.values()))["pairs"]
    lines += (
        [
            "",
            f"± is the standard error over seeds. One accuracy on {n} held-out pairs has a binomial standard "
            f"error of about {(0.25 / n) ** 0.5:.3f} at 0.5 ({(0.9 * 0.1 / n) ** 0.5:.3f} at 0.9).",
            "",
            "Raw results (JSON lines):",
            "",
            "```",
        ]
        + [json.dumps(r) for r in rows.values()]
        + ["```", ""]
    )
    path.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
