"""Held-out verdict accuracy of a tiny judge before and after GRPO, from scratch and from an SFT warm start.

    python bench/judge_grpo.py [--seeds 0,1,2] [--sft-steps 40] [--grpo-steps 60] [--out bench/results/judge_grpo.md]

The task is decided by the text: `a + b =` with two candidate answers, the correct sum (chosen) and one
off by 1 to 3 (rejected). Sums of (a, b) with (10a + b) % 5 == 0 are held out (20 of 100 combinations);
the training pairs use the rest. The judge is the ~1M-parameter Llama of tests/helpers/judge_grpo.py
(built from a config, seeded), its vocabulary covering the judge prompt.

Per seed, every arm through `rmspec run` on CPU:
- scratch: the random init, then GRPO (method grpo) for --grpo-steps;
- warm: SFT on written verdicts (method sft, both orders, --sft-steps), then GRPO from it (model.init_from).
Held-out accuracy is judged greedily in both orders with the code the trainer uses at the end
(rmspec.train.judge_grpo: judge rows, the inference path's prompt layout); "both" counts a pair right only
when it is right in both orders (JudgeBench's rule), "mean" is the average of the two orders.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
from pathlib import Path

from _judge_common import REPO, mean_se, run, write_jsonl
from _judge_common import held_out_accuracy as judged

sys.path.insert(0, str(REPO / "tests"))

from helpers.judge_grpo import SPEC, build_judge_model  # noqa: E402


def pairs(held_out: bool, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    combos = [(a, b) for a in range(10) for b in range(10) if ((10 * a + b) % 5 == 0) == held_out]
    rows = []
    for i in range(n):
        a, b = combos[i % len(combos)] if held_out else rng.choice(combos)
        wrong = abs(a + b + rng.choice([-3, -2, -1, 1, 2, 3]))
        rows.append(
            {
                "id": f"{'h' if held_out else 't'}{i}",
                "prompt": f"{a} + {b} =",
                "chosen": str(a + b),
                "rejected": str(wrong),
            }
        )
    return rows


def sft_rows(rows: list[dict]) -> list[dict]:
    from rmspec.inference.judge import judge_message

    out = []
    for r in rows:
        out.append(
            {
                "messages": [
                    {"role": "user", "content": judge_message(r["prompt"], r["chosen"], r["rejected"])},
                    {"role": "assistant", "content": "[[A]]"},
                ]
            }
        )
        out.append(
            {
                "messages": [
                    {"role": "user", "content": judge_message(r["prompt"], r["rejected"], r["chosen"])},
                    {"role": "assistant", "content": "[[B]]"},
                ]
            }
        )
    return out


def held_out_accuracy(model_dir: Path, held: list[dict]) -> dict[str, float]:
    from rmspec.spec import load_spec

    approach = load_spec(REPO / "specs" / "judge_grpo.yaml").spec.approach  # default template and rule
    return judged(model_dir, held, approach, 4)


def grpo_spec(model: Path, data: Path, out: Path, steps: int, seed: int, init_from: Path | None) -> str:
    text = SPEC.format(
        name="grpo", model=model, data=data, steps=steps, lr=3e-3, seed=seed, save=100000, grpo="", out=out
    )
    text = text.replace("validation_fraction: 0.25", "validation_fraction: 0.1")
    if init_from is not None:
        text = text.replace(
            f"model: {{name_or_path: {model}}}", f"model: {{name_or_path: {model}, init_from: {init_from}}}"
        )
    return text


SFT_SPEC = """version: 1
name: sft
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [{data}]}}
  mapping: {{preset: messages}}
  split: {{validation_fraction: 0.1, seed: 0}}
approach: {{kind: generative, max_new_tokens: 4}}
training: {{learning_rate: 3.0e-3, lr_scheduler: constant, max_steps: {steps}, global_batch_size: 16, micro_batch_size: 16, max_length: 256, logging_steps: 5, save_steps: 100000, seed: {seed}}}
hardware: {{device: cpu}}
eval: {{validation: false, benchmarks: []}}
output: {{dir: {out}, report: [console]}}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sft-steps", type=int, default=40)
    parser.add_argument("--grpo-steps", type=int, default=60)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "judge_grpo.md"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    held = pairs(True, 20, 99)
    table: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, list[float]] = {}

    def add(arm: str, figures: dict[str, float]) -> None:
        for k, v in figures.items():
            table.setdefault(arm, {}).setdefault(k, []).append(v)

    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            model = build_judge_model(folder / "model", seed=seed)
            train = write_jsonl(folder / "train.jsonl", pairs(False, 400, seed))
            sft_data = write_jsonl(folder / "sft.jsonl", sft_rows(pairs(False, 400, seed)))
            add("random init (before)", held_out_accuracy(model, held))
            seconds.setdefault("grpo from scratch", []).append(
                run(grpo_spec(model, train, folder / "scratch", args.grpo_steps, seed, None), folder, "scratch")
            )
            add("GRPO from scratch (after)", held_out_accuracy(folder / "scratch" / "model", held))
            seconds.setdefault("sft", []).append(
                run(
                    SFT_SPEC.format(model=model, data=sft_data, steps=args.sft_steps, seed=seed, out=folder / "sft"),
                    folder,
                    "sft",
                )
            )
            add("SFT warm start (before GRPO)", held_out_accuracy(folder / "sft" / "model", held))
            seconds.setdefault("grpo from sft", []).append(
                run(grpo_spec(model, train, folder / "warm", args.grpo_steps, seed, folder / "sft"), folder, "warm")
            )
            add("GRPO from SFT (after)", held_out_accuracy(folder / "warm" / "model", held))
            print(f"seed {seed}: " + json.dumps({k: v["mean"][-1] for k, v in table.items()}), flush=True)

    lines = [
        "# Judge trained by GRPO: held-out verdict accuracy before and after",
        "",
        f"Command: `python bench/judge_grpo.py --seeds {args.seeds} --sft-steps {args.sft_steps} --grpo-steps {args.grpo_steps}`",
        "",
        f"Machine: {platform.machine()}, 2 shared CPU cores (contended by other jobs), torch CPU; every arm through `rmspec run`.",
        "Task: `a + b =`, chosen = the sum, rejected = off by 1-3; 20 held-out (a, b) combinations never trained on, "
        "judged greedily in both orders. Judge: ~1M-parameter Llama from a config (tests/helpers/judge_grpo.py). "
        "GRPO: num_generations 4, max_completion_length 4, global batch 16 completions, lr 3e-3, beta 0. "
        "SFT: written verdicts, both orders, same lr.",
        "",
        f"Mean ± standard error over seeds {args.seeds} (n = {len(seeds)}).",
        "",
        "| model | first order | swapped order | mean of orders | both orders right | unparsed |",
        "|---|---|---|---|---|---|",
    ]
    for arm, figures in table.items():
        lines.append(
            f"| {arm} | {mean_se(figures['first'])} | {mean_se(figures['swapped'])} | {mean_se(figures['mean'])} | "
            f"{mean_se(figures['both'])} | {mean_se(figures['unparsed'])} |"
        )
    lines += [
        "",
        "Wall time per run (s, includes process start and evaluation): "
        + ", ".join(f"{k} {mean_se(v)}" for k, v in seconds.items()),
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
