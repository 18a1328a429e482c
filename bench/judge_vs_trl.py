"""A generative judge on a task a 135M model can do, rmspec vs TRL's SFTTrainer (issue 50 item 2 and its
control): SmolLM2-135M-Instruct judging "Which word names an animal?" between an animal and an object,
trained on written verdicts, judged on held-out pairs of words never trained on, in both orders.

    # the base model asked directly (no judge prompt): can it tell an animal from an object at all?
    python bench/judge_vs_trl.py --direct
    # the base model as a judge (step 0; greedy, the same for every seed)
    python bench/judge_vs_trl.py --base
    # one training run, judged at each step of --at (rmspec: `rmspec run`, checkpoints; trl: SFTTrainer)
    python bench/judge_vs_trl.py --trainer rmspec --seed 0 --at 25,50,100
    python bench/judge_vs_trl.py --trainer trl --seed 0 --at 25,50,100
    # the table of every point recorded so far (mean ± standard error across seeds)
    python bench/judge_vs_trl.py --table
    # the demo preference pairs (issue 50 item 3): the Bradley-Terry runs' split, judged beside their accuracy
    python bench/judge_vs_trl.py --task demo --base
    python bench/judge_vs_trl.py --task demo --trainer rmspec --seed 0 --at 40,80 --max-length 320
    # issue 50 item 5: also the letter probabilities at the verdict position (--probs; p_* figures), keeping the
    # trained judge (--keep DIR); a kept judge measured again, or the base model's probabilities alone
    python bench/judge_vs_trl.py --task demo --trainer rmspec --seed 0 --at 40 --max-length 320 --probs --keep DIR
    python bench/judge_vs_trl.py --task demo --trainer rmspec --seed 0 --at 40 --judge DIR/sft/model --probs-only
    python bench/judge_vs_trl.py --task demo --base --probs-only

Every call adds its figures to --json (bench/results/judge_learning_words.json; with --task demo,
bench/results/judge_learning_demo.json) and keeps what is there.

--task demo: the pairs of rmspec/data/demo/preferences.jsonl split as bench/trl_vs_rmspec.py splits them for
bench/results/quality_vs_trl.md (specs/quickstart.yaml's data section: 10% held out by family, split seed
0, with SmolLM2's tokenizer; trl_vs_rmspec.prepare_data). Training: every training pair (2873) in both orders;
held out: the same fixed 200 validation pairs the Bradley-Terry runs are scored on. The pairs' text is
the file's (the prompt is one user turn); the judge sees it whole (--max-length above the longest
conversation, 269 tokens), the Bradley-Terry runs saw at most 256 tokens per response.

The same rows for both trainers: each training pair is written in both orders as a conversation (user: the
judge prompt, assistant: "(A)"/"(B)"); rmspec trains on it with `approach: generative, method: sft`
(loss on the assistant reply and its end token, no validation split); TRL's SFTTrainer gets the very token
ids rmspec's data layout renders (rmspec.data.layout.Layout.turns: input_ids, and completion_mask on the
learned pieces, completion_only_loss=True), so prompt, loss tokens, learning rate, constant schedule, batch,
steps, optimizer (fused AdamW), clipping and seed are the same; the order rows are drawn in is each
trainer's own. Held-out judging is bench/_judge_common's (greedy, both orders, rmspec's prompt layout and
verdict rule) for both. Run with one torch thread (OMP_NUM_THREADS=1).

--probs: where greedy verdicts only show the more probable letter, the letter probabilities show how far the
judge is from 50/50: for each held-out prompt, one forward of the prompt and the reply's "(" gives P(A) and
P(B) at the verdict position, and P(correct) = P(correct letter) / (P(A) + P(B))
(bench/_judge_common.letter_probabilities); --table then prints them per point.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _judge_common import REPO, judge_model, letter_probabilities, run, write_jsonl
from judge_learning import checkpoint_model, sft_spec, step_losses
from judge_smollm2 import (
    approach_for_eval,
    base_model_dir,
    sft_rows,
)

QUESTION = "Which word names an animal?"
ANIMALS = [
    "dog",
    "cat",
    "horse",
    "cow",
    "pig",
    "sheep",
    "goat",
    "chicken",
    "duck",
    "rabbit",
    "mouse",
    "rat",
    "lion",
    "tiger",
    "bear",
    "wolf",
    "fox",
    "deer",
    "elephant",
    "monkey",
    "zebra",
    "giraffe",
    "camel",
    "donkey",
    "frog",
    "snake",
    "turtle",
    "shark",
    "whale",
    "dolphin",
    "eagle",
    "owl",
    "parrot",
    "penguin",
    "bee",
    "ant",
    "spider",
    "butterfly",
    "squirrel",
    "kangaroo",
]
THINGS = [
    "chair",
    "table",
    "spoon",
    "fork",
    "knife",
    "plate",
    "cup",
    "bottle",
    "door",
    "window",
    "pencil",
    "book",
    "lamp",
    "shoe",
    "hat",
    "shirt",
    "clock",
    "phone",
    "bed",
    "sofa",
    "car",
    "bus",
    "train",
    "ball",
    "box",
    "bag",
    "key",
    "coin",
    "brick",
    "cloud",
    "rock",
    "sand",
    "hammer",
    "ladder",
    "mirror",
    "pillow",
    "towel",
    "candle",
    "basket",
    "bucket",
]


def words(held: bool) -> tuple[list[str], list[str]]:
    """Held-out words: every fourth word of each list; training never sees them."""
    return (
        [w for i, w in enumerate(ANIMALS) if (i % 4 == 0) == held],
        [w for i, w in enumerate(THINGS) if (i % 4 == 0) == held],
    )


def pairs(held: bool, n: int, seed: int, task: str = "repeat") -> list[dict]:
    """n distinct pairs, seeded. repeat: "Repeat this word: x", chosen x, rejected another word of the same
    side; animal: "Which word names an animal?", chosen an animal, rejected an object."""
    rng = random.Random(seed)
    animals, things = words(held)
    if task == "animal":
        combos = [(a, t) for a in animals for t in things]
    else:
        vocabulary = animals + things
        combos = [(x, y) for x in vocabulary for y in vocabulary if x != y]
    return [
        {
            "id": f"{'h' if held else 't'}{i}",
            "prompt": QUESTION if task == "animal" else f"Repeat this word: {x}",
            "chosen": x,
            "rejected": y,
        }
        for i, (x, y) in enumerate(rng.sample(combos, n))
    ]


def demo_pairs(model: str, folder: Path) -> tuple[list[dict], list[dict]]:
    """(training pairs, the 200 held-out pairs) of the demo preferences, split as quality_vs_trl.md's runs."""
    from datasets import load_from_disk
    from trl_vs_rmspec import SPEC, prepare_data

    prepare_data(folder / "demo", {"model": model, "spec": str(SPEC), "eval_rows": 200})

    def rows(split: str) -> list[dict]:
        out = []
        for r in load_from_disk(str(folder / "demo" / split)):
            (turn,) = r["prompt_messages"]  # the demo prompts are one user turn each
            out.append({"id": r["id"], "prompt": turn["content"], "chosen": r["chosen"], "rejected": r["rejected"]})
        return out

    return rows("train"), rows("validation")


def load(model_dir: Path):
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok, transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()


def judged(model, tok, held: list[dict], args=None) -> dict:
    """The greedy figures (unless --probs-only) and, with --probs, the letter probabilities (p_*)."""
    probs_only = bool(args and args.probs_only)
    figures = {} if probs_only else judge_model(model, tok, held, approach_for_eval(), 8)
    if args and (args.probs or probs_only):
        figures |= letter_probabilities(model, tok, held, approach_for_eval())
    return figures


def direct(model_dir: Path, held: list[dict], task: str) -> dict:
    """The base model asked the question itself (greedy, 12 new tokens). animal: both orders of each pair,
    right when the reply names the animal only; repeat: "Repeat this word: x" for each held-out word, right
    when x is in the reply."""
    import torch

    tok, model = load(model_dir)

    def ask(question: str) -> str:
        chat = [{"role": "user", "content": question}]
        ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
        return tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True).strip()

    with torch.no_grad():
        if task == "repeat":
            held_words = sum(words(True), [])
            replies = [(w, ask(f"Repeat this word: {w}")) for w in held_words]
            right = sum(w in reply.lower() for w, reply in replies)
            return {"right": right, "asked": len(replies), "share": right / len(replies), "examples": replies[:6]}
        right, examples = [], []
        for r in held:
            for x, y in ((r["chosen"], r["rejected"]), (r["rejected"], r["chosen"])):
                reply = ask(f"Which of these two words names an animal: {x} or {y}? Answer with the word.")
                low = reply.lower()
                right.append(r["chosen"] in low and r["rejected"] not in low)
                examples.append(f"{x} or {y}: {reply!r}")
    first, swapped = right[::2], right[1::2]
    return {
        "first": sum(first) / len(first),
        "swapped": sum(swapped) / len(swapped),
        "mean": sum(right) / len(right),
        "both": sum(a and b for a, b in zip(first, swapped)) / len(first),
        "examples": examples[:6],
    }


def train_rmspec(args, base: Path, folder: Path, train: list[dict], held: list[dict], add) -> None:
    data = write_jsonl(folder / "sft.jsonl", sft_rows(train))
    at = args.at
    spec = sft_spec(args, data, folder, at).replace("validation_fraction: 0.05", "validation_fraction: null")
    spec = spec.replace("max_length: 128", f"max_length: {args.max_length}")
    seconds = run(spec, folder, "sft")
    final = folder / "sft" / "model"
    loss = dict(step_losses(folder / "sft"))
    for step in at:
        model_dir = (
            final if step == at[-1] else checkpoint_model(folder / "sft" / "checkpoints" / f"checkpoint-{step}", final)
        )
        tok, model = load(model_dir)
        add(step, judged(model, tok, held, args), seconds=seconds if step == at[-1] else None, losses=loss)


def train_trl(args, base: Path, folder: Path, train: list[dict], held: list[dict], add) -> None:
    import datasets
    import transformers
    import trl

    from rmspec.inference.encoding import make_layout

    tok, model = load(base)
    layout = make_layout(tok)
    rows = []
    for conv in sft_rows(train):
        turns = layout.turns(conv["messages"])
        ids = [t for piece in turns.pieces for t in piece]
        mask = [int(learn) for piece, learn in zip(turns.pieces, turns.learn) for _ in piece]
        rows.append({"input_ids": ids, "completion_mask": mask})
    config = trl.SFTConfig(
        output_dir=str(folder / "trl"),
        max_steps=args.at[-1],
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch_fused",
        per_device_train_batch_size=args.batch,
        gradient_accumulation_steps=1,
        seed=args.seed,
        data_seed=args.seed,
        bf16=False,
        fp16=False,
        use_cpu=True,
        gradient_checkpointing=False,
        completion_only_loss=True,
        max_length=args.max_length,
        logging_steps=5,
        save_strategy="no",
        report_to=[],
        dataloader_num_workers=0,
    )
    started = time.monotonic()
    loss: dict[int, float] = {}

    class Judge(transformers.TrainerCallback):
        def on_log(self, _args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                loss[state.global_step] = logs["loss"]

        def on_step_end(self, _args, state, control, model=None, **kw):
            if state.global_step in args.at:
                done = state.global_step == args.at[-1]
                if done and args.keep:  # the judge itself, saved first: --judge measures it again without training
                    model.save_pretrained(folder / "trl" / "model")
                    tok.save_pretrained(folder / "trl" / "model")
                model.eval()
                figures = judged(model, tok, held, args)
                model.train()
                add(state.global_step, figures, seconds=time.monotonic() - started if done else None, losses=dict(loss))

    model.train()
    trainer = trl.SFTTrainer(
        model=model,
        args=config,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tok,
        callbacks=[Judge()],
    )
    trainer.train()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainer", choices=("rmspec", "trl"))
    parser.add_argument("--task", choices=("repeat", "animal", "demo"), default="repeat")
    parser.add_argument("--direct", action="store_true")
    parser.add_argument("--base", action="store_true")
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--at", default="25,50,100")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument(
        "--train", type=int, default=400, help="training pairs (each written in both orders; demo: all of them)"
    )
    parser.add_argument("--held", type=int, default=50, help="held-out pairs (each judged in both orders; demo: 200)")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per training conversation")
    parser.add_argument("--model", default="packaged:smollm2-135m-instruct")
    parser.add_argument(
        "--probs",
        action="store_true",
        help="also the letter probabilities at the verdict position (one forward per prompt; p_* figures)",
    )
    parser.add_argument("--probs-only", action="store_true", help="the letter probabilities, no greedy verdicts")
    parser.add_argument(
        "--keep", help="work in this folder (kept: the trained judge, its checkpoints) not a temporary one"
    )
    parser.add_argument(
        "--judge", help="measure the judge in this model folder (trainer, seed and step from --trainer, --seed, --at)"
    )
    parser.add_argument("--json", help="default: bench/results/judge_learning_words.json (demo: _demo.json)")
    args = parser.parse_args()
    args.at = sorted(int(s) for s in args.at.split(","))
    if args.task == "demo":
        args.held = 200
        if args.direct:
            parser.error("--direct asks the word tasks' questions; the demo pairs have none")
    store = Path(
        args.json or REPO / "bench" / "results" / f"judge_learning_{'demo' if args.task == 'demo' else 'words'}.json"
    )
    record = json.loads(store.read_text()) if store.exists() else {"points": []}
    if args.table:
        print(table(record, args.held))
        if any("p_correct" in p for p in record["points"]):
            print()
            print(probability_table(record))
            print()
            print(family_table(record))
        return
    import torch

    torch.set_num_threads(1)
    command = "python bench/judge_vs_trl.py " + " ".join(sys.argv[1:])

    def save() -> None:
        store.write_text(json.dumps(record, indent=1) + "\n")

    def add(step: int, figures: dict, seconds: float | None = None, losses: dict | None = None) -> None:
        point = {
            "task": args.task,
            "trainer": args.trainer,
            "seed": args.seed,
            "step": step,
            "lr": args.lr,
            "batch": args.batch,
        }
        point |= {**figures, "load": os.getloadavg()[0], "seconds": seconds, "command": command}
        if losses:
            point["train_losses"] = {str(k): v for k, v in sorted(losses.items()) if k <= step}
        record["points"].append(point)
        save()
        print(json.dumps({k: v for k, v in point.items() if k != "train_losses"}), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        base = base_model_dir(args.model, folder)
        if args.task == "demo":
            train, held = demo_pairs(args.model, folder)
        else:
            train, held = pairs(False, args.train, args.seed, args.task), pairs(True, args.held, 99, args.task)
        record["machine"] = f"{platform.machine()}, {os.cpu_count()} shared CPU cores, torch {torch.__version__}"
        if args.direct:
            record[f"direct_{args.task}"] = {
                **direct(base, held, args.task),
                "command": command,
                "load": os.getloadavg()[0],
            }
            save()
            print(json.dumps(record[f"direct_{args.task}"], indent=1))
            return
        if args.base:
            tok, model = load(base)
            args.trainer = "base"
            add(0, judged(model, tok, held, args))
            return
        if args.judge:
            tok, model = load(Path(args.judge))
            add(args.at[-1], judged(model, tok, held, args))
            return
        (train_rmspec if args.trainer == "rmspec" else train_trl)(args, base, folder, train, held, add)


def probability_table(record: dict) -> str:
    """The points with letter probabilities, one row each: P(correct) = P(correct letter) / (P(A) + P(B)) at the
    verdict position, mean over both orders of every held-out pair ± its standard error over the pairs."""
    lines = [
        "| trainer | steps | seed | P(correct) | first order | swapped order | correct more probable in both orders | "
        "on average over the orders | P(A)/(P(A)+P(B)) | its range over the prompts | P(A)+P(B) | P('(') | load |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in sorted(  # load: when the probabilities were measured (p_load where the greedy run's differs)
        (p for p in record["points"] if "p_correct" in p),
        key=lambda p: (p["trainer"] != "base", p["trainer"], p["step"]),
    ):
        seed = "-" if p["trainer"] == "base" else str(p["seed"])
        # P(A) / (P(A) + P(B)) of each prompt: P(correct) in the first order (A is correct), 1 - it in the swapped
        p_a = [x for first, swapped in p["p_correct_by_pair"].values() for x in (first, 1 - swapped)]
        lines.append(
            f"| {p['trainer']} | {p['step']} | {seed} | {p['p_correct']:.4f} ± {p['p_correct_se']:.4f} | "
            f"{p['p_correct_first']:.4f} | {p['p_correct_swapped']:.4f} | {p['p_both']:.3f} | {p['p_pair']:.3f} | "
            f"{p['p_a']:.4f} | {min(p_a):.3f}-{max(p_a):.3f} | {p['p_letters']:.4f} | {p['p_open']:.4f} | "
            f"{p.get('p_load', p['load']):.1f} |"
        )
    return "\n".join(lines)


def family_table(record: dict) -> str:
    """Per point with letter probabilities (demo pairs): P(correct), both orders averaged, per family of the
    held-out pairs (rmspec/data/demo/preferences.jsonl's `family`), and P(the longer response): the mean
    probability, of the two letters, of the one whose response has more characters (0.5: no length cue)."""
    demo = {
        r["id"]: r
        for r in map(json.loads, (REPO / "rmspec" / "data" / "demo" / "preferences.jsonl").read_text().splitlines())
    }
    points = [p for p in record["points"] if "p_correct_by_pair" in p]
    families = sorted({demo[i]["family"] for p in points for i in p["p_correct_by_pair"]})
    lines = [
        "| trainer | steps | seed | " + " | ".join(f"{f} (n)" for f in families) + " | P(the longer response) |",
        "|---|---:|---|" + "---:|" * (len(families) + 1),
    ]
    for p in points:
        cells, longer = [], []
        for family in families:
            pairs_ = {i: v for i, v in p["p_correct_by_pair"].items() if demo[i]["family"] == family}
            cells.append(f"{statistics.mean(sum(v) / 2 for v in pairs_.values()):.3f} ({len(pairs_)})")
        for i, v in p["p_correct_by_pair"].items():
            if len(demo[i]["chosen"]) != len(demo[i]["rejected"]):
                chosen_longer = len(demo[i]["chosen"]) > len(demo[i]["rejected"])
                longer.append(sum(v) / 2 if chosen_longer else 1 - sum(v) / 2)
        seed = "-" if p["trainer"] == "base" else str(p["seed"])
        lines.append(
            f"| {p['trainer']} | {p['step']} | {seed} | " + " | ".join(cells) + f" | {statistics.mean(longer):.3f} |"
        )
    return "\n".join(lines)


def table(record: dict, held: int) -> str:
    """Mean ± standard error across seeds where there are several, else the binomial one over held-out pairs."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for p in record["points"]:
        if "first" not in p:  # a point of letter probabilities only (--probs-only)
            continue
        groups.setdefault((p["trainer"], p["step"]), []).append(p)
    lines = [
        "| trainer | steps | seeds | first order | swapped order | mean of orders | both orders right | letter A | unparsed | load |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def fig(ps: list[dict], key: str, n: int) -> str:
        values = [p[key] for p in ps]
        if len(values) > 1:
            return f"{statistics.mean(values):.3f} ± {statistics.stdev(values) / len(values) ** 0.5:.3f}"
        v = values[0]
        return f"{v:.3f} ± {(v * (1 - v) / n) ** 0.5:.3f}"

    for (trainer, step), ps in sorted(groups.items(), key=lambda kv: (kv[0][0] != "base", kv[0][0], kv[0][1])):
        seeds = ",".join(str(p["seed"]) for p in ps) if trainer != "base" else "-"
        lines.append(
            f"| {trainer} | {step} | {seeds} | {fig(ps, 'first', held)} | {fig(ps, 'swapped', held)} | "
            f"{fig(ps, 'mean', 2 * held)} | {fig(ps, 'both', held)} | {fig(ps, 'letter_a', 2 * held)} | "
            f"{fig(ps, 'unparsed', 2 * held)} | {statistics.mean(p['load'] for p in ps):.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
