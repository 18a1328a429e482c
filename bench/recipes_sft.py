"""The SFT term (approach.sft_weight) on a decoder: Bradley-Terry alone vs Bradley-Terry + w x the
next-token loss of the chosen response, same optimizer steps, through `rmspec run` and `rmspec score`.

No pretrained decoder is available offline, so this is a toy built here: the random-init Qwen2-shaped
decoder and BPE tokenizer of bench/train_decoder_vs_trl.py (about 10M parameters), and pairs whose
preference is a property a language model can learn: the chosen reply follows a fixed word-to-word
chain (each word's successor, 90% of the time), the rejected one follows it 30% of the time, both
the same length distribution and starting anywhere, so no single token gives the answer away. The
SFT term models the chosen replies' language; whether that helps the reward head rank held-out
pairs is what is measured. A pretrained LLM (GRM's setting) is a different regime: read this as
"what the option does here", not as a reproduction.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/recipes_sft.py --steps 60 --seeds 0 1 2 --weights 0 0.1 1.0 \\
        --out bench/results/recipes_sft.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from train_decoder_vs_trl import WORDS, build_decoder, sentence  # noqa: E402 (the bench folder, put on the path above)

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}, dtype: float32}}
data:
  source: {{kind: files, paths: [{data}]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: null}}
approach: {{kind: bradley_terry{sft}}}
training: {{max_steps: {steps}, learning_rate: 3.0e-4, global_batch_size: 16, max_length: 256, logging_steps: 10,
           seed: {seed}}}
hardware: {{device: cpu}}
eval: {{validation: false, benchmarks: []}}
output: {{dir: {out}}}
"""


def chain_reply(rng: random.Random, successor: dict[str, str], follow: float) -> str:
    word = rng.choice(WORDS)
    out = [word]
    for _ in range(rng.randint(9, 19)):
        word = successor[word] if rng.random() < follow else rng.choice(WORDS)
        out.append(word)
    return " ".join(out)


def make_pairs(rng: random.Random, successor: dict[str, str], n: int) -> list[dict]:
    return [
        {
            "prompt": sentence(rng, rng.randint(6, 12)),
            "chosen": chain_reply(rng, successor, 0.9),
            "rejected": chain_reply(rng, successor, 0.3),
        }
        for _ in range(n)
    ]


def rmspec(*args, cwd: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env
    )
    if done.returncode:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])


def heldout_accuracy(model: Path, heldout: Path, work: Path) -> float:
    out = work / "scored.jsonl"
    rmspec("score", model, heldout, "--out", out, "--overwrite", cwd=work)
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    return sum(s["reward_chosen"] > s["reward_rejected"] for s in scored) / len(scored)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.1, 1.0])
    ap.add_argument("--train", type=int, default=480)
    ap.add_argument("--heldout", type=int, default=400)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    started = time.time()
    rng = random.Random(0)
    successor = dict(zip(WORDS, rng.sample(WORDS, len(WORDS))))
    results: dict[float, list[dict]] = {w: [] for w in args.weights}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train, held = make_pairs(rng, successor, args.train), make_pairs(rng, successor, args.heldout)
        for name, rows in (("train.jsonl", train), ("heldout.jsonl", held)):
            (work / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        build_decoder(work / "model", [r["prompt"] + " " + r["chosen"] + " " + r["rejected"] for r in train])
        for seed in args.seeds:
            for weight in args.weights:
                name = f"sft{weight}-{seed}"
                sft = f", sft_weight: {weight}" if weight else ""
                spec = work / f"{name}.yaml"
                out = work / "runs" / name
                spec.write_text(
                    SPEC.format(
                        name=name,
                        model=work / "model",
                        data=work / "train.jsonl",
                        sft=sft,
                        steps=args.steps,
                        seed=seed,
                        out=out,
                    )
                )
                t0 = time.time()
                rmspec("run", spec, cwd=work)
                seconds = time.time() - t0
                last = {}
                for line in (out / "metrics.jsonl").read_text().splitlines():
                    last.update({k: v for k, v in json.loads(line).items() if k.startswith("train/")})
                row = {
                    "weight": weight,
                    "seed": seed,
                    "accuracy": heldout_accuracy(out / "model", work / "heldout.jsonl", work),
                    "train_seconds": round(seconds, 1),
                    "last_train_accuracy": last.get("train/rm/accuracy"),
                    "last_sft_loss": last.get("train/rm/sft_loss"),
                }
                results[weight].append(row)
                print(json.dumps(row), flush=True)
    write(args, results, load_before, time.time() - started)


def write(args, results: dict[float, list[dict]], load_before: float, seconds: float) -> None:
    def mean_se(vals: list[float]) -> str:
        if len(vals) < 2:
            return f"{vals[0]:.3f}"
        return f"{statistics.mean(vals):.3f} ± {statistics.stdev(vals) / len(vals) ** 0.5:.3f}"

    lines = [
        "# Recipes: the SFT term on a (toy) decoder",
        "",
        f"Command: `HF_HUB_OFFLINE=1 .venv/bin/python bench/recipes_sft.py --steps {args.steps} --seeds "
        f"{' '.join(map(str, args.seeds))} --weights {' '.join(map(str, args.weights))}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores shared with other agents; load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after; the invocation took {seconds / 60:.1f} min.",
        "",
        "Setup (see the module docstring): random-init Qwen2-shaped decoder, about 10M parameters, BPE tokenizer "
        f"with a ChatML template, trained from scratch; {args.train} training pairs, {args.heldout} held-out pairs "
        "from the same generator (chosen follows a word chain 90% of the time, rejected 30%); global batch 16, "
        f"lr 3e-4 linear, {args.steps} optimizer steps, fp32; `rmspec run`, then `rmspec score` on the held-out pairs.",
        "",
        "| sft_weight | held-out accuracy | per seed | train pair accuracy (last log) | SFT loss (last log) | seeds |",
        "|---|---|---|---|---|---|",
    ]
    for weight, rows in results.items():
        acc = [r["accuracy"] for r in rows]
        bt = [r["last_train_accuracy"] for r in rows if r["last_train_accuracy"] is not None]
        sft = [r["last_sft_loss"] for r in rows if r["last_sft_loss"] is not None]
        lines.append(
            f"| {weight:g} | {mean_se(acc)} | {', '.join(f'{a:.3f}' for a in acc)} | "
            f"{mean_se(bt) if bt else '-'} | {mean_se(sft) if sft else '-'} | {len(rows)} |"
        )
    n = args.heldout
    lines += [
        "",
        f"± is the standard error over seeds. One accuracy on {n} held-out pairs has a binomial standard error "
        f"of about {(0.25 / n) ** 0.5:.3f} at 0.5.",
        "",
        "Raw results (JSON lines):",
        "",
        "```",
        *(json.dumps(r) for rows in results.values() for r in rows),
        "```",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
