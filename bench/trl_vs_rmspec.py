"""rmspec vs TRL's RewardTrainer: the same model, data and settings, side by side.

Speed (the default: one run of each, MiniLM, the table bench/results/train_vs_trl.md):

    python bench/trl_vs_rmspec.py [--max-steps N] [--out bench/results/train_vs_trl.md]

Quality (--seeds: held-out accuracy of both trainers over several seeds, with standard errors and
loss curves; bench/results/quality_vs_trl.md):

    HF_HUB_OFFLINE=1 python bench/trl_vs_rmspec.py --model packaged:smollm2-135m-instruct --seeds 1,2,3 \
        --steps 40 --batch 8 --lr 2e-5 --max-length 256 --eval-rows 200 --out bench/results/quality_vs_trl.md

Model: the packaged all-MiniLM-L6-v2 (BERT, 22M) unless --model (a packaged GGUF model such as
packaged:smollm2-135m-instruct is dequantised to float32 once, as `rmspec run` does). Data:
specs/quickstart.yaml (or --spec) through rmspec.data.prepare (the demo preferences, split 90/10 by
family; the same token ids go to both trainers, laid out by rmspec with the model's tokenizer).
Settings, both trainers, from that spec and the options: fp32, no gradient checkpointing, the
spec's optimizer, warmup ratio, weight decay and clipping; batch, learning rate (linear), steps,
max_length and seed from the options (defaults: the spec's 16 pairs, 1e-4, one epoch, 256, 42).
Each trainer runs in its own process (so peak RSS is its own), one after the other; the parent
writes the table.

Speed mode measures pairs/s and real (non-pad) tokens/s over the training loop, the share of
padding in the token slots the model computed, peak RSS and held-out accuracy; each trainer keeps
its own batch order (rmspec groups by length). Quality mode gives both trainers the same batches
in the same order (rmspec's seeded sampler, no length grouping, for TRL too), the seed also seeds
TRL's model creation, and both log the loss at every step. Held-out accuracy: the chosen response
scored above the rejected one (ties wrong), each model with its own pad token.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "specs" / "quickstart.yaml"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class CountingCollator:
    """Wraps a collator and counts real and padded token slots of every batch it builds."""

    def __init__(self, inner):
        self.inner = inner
        self.real = 0
        self.slots = 0

    def __call__(self, rows):
        batch = self.inner(rows)
        mask = batch.get("attention_mask")
        if mask is not None and mask.dim() == 2:
            self.real += int(mask.sum())
            self.slots += mask.numel()
        else:  # a shared-prefix packed batch: its tokens are the row's, padding aside
            ids = batch["input_ids"]
            self.slots += ids.numel()
            self.real += int((batch["packed_group"] >= 0).sum()) if "packed_group" in batch else ids.numel()
        return batch


def model_path(model: str) -> str:
    """The local folder of ``model``: a GGUF model's dequantised copy, a packaged or local folder, else the id."""
    from rmspec.gguf_source import gguf_source
    from rmspec.packaged import resolve_model_path

    source = gguf_source(model, None, None)
    if source is not None:
        from rmspec.inference.gguf_weights import dequantised_model

        return str(dequantised_model(source))
    return resolve_model_path(model)


def load(settings: dict, seed: int | None = None):
    """The spec both trainers take their settings from: the file with the options laid over it."""
    from rmspec.spec import load_spec

    sets = [f"model.name_or_path={settings['model']}"]
    if settings.get("max_steps"):
        sets.append(f"training.max_steps={settings['max_steps']}")
    for key in ("learning_rate", "max_length"):
        if settings.get(key) is not None:
            sets.append(f"training.{key}={settings[key]}")
    if settings.get("batch"):
        sets += [f"training.global_batch_size={settings['batch']}", f"training.micro_batch_size={settings['batch']}"]
    if seed is not None:
        sets.append(f"training.seed={seed}")
    if settings.get("quality"):
        sets += ["training.logging_steps=1", f"training.group_by_length={str(settings['group_by_length']).lower()}"]
    return load_spec(settings["spec"], sets)


def tokenizer_for(path: str):
    from rmspec.train.modeling import ensure_pad_token, load_tokenizer

    tok = load_tokenizer(path)
    ensure_pad_token(tok)
    return tok


def prepare_data(folder: Path, settings: dict) -> dict:
    from rmspec.data import prepare
    from rmspec.data.report import length_heuristic

    loaded = load(settings)
    prepared = prepare(loaded, tokenizer_for(model_path(settings["model"])), cache_dir=folder / "cache")
    prepared.train.save_to_disk(str(folder / "train"))
    validation = prepared.validation
    if settings.get("eval_rows") and settings["eval_rows"] < len(validation):
        # A fixed subset (the same for every seed and trainer): a seeded shuffle of the split, its first N rows.
        validation = validation.shuffle(seed=0).select(range(settings["eval_rows"]))
    validation.save_to_disk(str(folder / "validation"))
    report = prepared.report.to_json()
    report["evaluated"] = len(validation)
    report["evaluated_length_heuristic"] = length_heuristic(
        [len(x) for x in validation["chosen_input_ids"]], [len(x) for x in validation["rejected_input_ids"]]
    )
    return report


@__import__("torch").no_grad()
def held_out(model, validation, use_token_types: bool) -> list[int]:
    """1 where the model scores the chosen response above the rejected one (ties wrong), per row."""
    from rmspec.train.collators import PairCollator
    from rmspec.train.rewards import forward_scores

    model.eval()
    collate = PairCollator(model.config.pad_token_id)
    rows = [validation[i] for i in range(len(validation))]
    # Rows of similar length share a batch (less padding to compute); each row's result is its own.
    order = sorted(
        range(len(rows)), key=lambda i: max(len(rows[i]["chosen_input_ids"]), len(rows[i]["rejected_input_ids"]))
    )
    right = [0] * len(rows)
    for i in range(0, len(order), 32):
        chunk = order[i : i + 32]
        batch = collate([rows[j] for j in chunk])
        types = batch.get("token_type_ids") if use_token_types else None
        scores = forward_scores(model, batch["input_ids"], batch["attention_mask"], types)[:, 0]
        half = scores.shape[0] // 2
        for j, ok in zip(chunk, (scores[:half] > scores[half:]).tolist()):
            right[j] = int(ok)
    return right


def held_out_accuracy(model, validation, use_token_types: bool) -> float:
    right = held_out(model, validation, use_token_types)
    return sum(right) / len(right)


def pooled_tokens(tok, rows, pad_id: int) -> dict:
    """Which token the sequence-classification head reads (the rightmost one that is not pad), over these rows."""
    counts: Counter = Counter()
    for row in rows:
        for key in ("chosen_input_ids", "rejected_input_ids"):
            ids = list(row[key])
            last = max((i for i, t in enumerate(ids) if t != pad_id), default=0)
            counts[f"{tok.decode([ids[last]])!r} (position {last - len(ids)})"] += 1
    return dict(counts.most_common(3))


def trl_config(spec, out: Path, settings: dict):
    """TRL's RewardConfig with the spec's settings (what rmspec's TrainingArguments take from it)."""
    from trl import RewardConfig

    from rmspec.train.arguments import optimizer_arguments

    tr = spec.training
    return RewardConfig(
        output_dir=str(out),
        per_device_train_batch_size=tr.global_batch_size,
        learning_rate=tr.learning_rate,
        lr_scheduler_type=tr.lr_scheduler,
        warmup_steps=tr.warmup_ratio,
        weight_decay=tr.weight_decay,
        max_grad_norm=tr.max_grad_norm,
        **optimizer_arguments(tr),
        num_train_epochs=tr.epochs or 1,
        max_steps=tr.max_steps or -1,
        seed=tr.seed,
        data_seed=tr.seed,
        bf16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        max_length=tr.max_length,
        report_to="none",
        save_strategy="no",
        logging_steps=tr.logging_steps,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def run_rmspec(data: Path, settings: dict, seed: int | None, out: Path) -> dict:
    from datasets import load_from_disk
    from transformers.trainer_utils import SaveStrategy

    from rmspec.train.arguments import build_training_arguments
    from rmspec.train.factory import build_trainer
    from rmspec.train.modeling import load_model, score_head

    spec = load(settings, seed).spec
    train, validation = load_from_disk(str(data / "train")), load_from_disk(str(data / "validation"))
    path = model_path(settings["model"])
    if settings.get("quality"):
        loaded = load_model(
            path, spec.approach, seed=spec.training.seed, attn_implementation="sdpa", tokenizer=tokenizer_for(path)
        )
    else:
        loaded = load_model(path, spec.approach, seed=spec.training.seed)
    args = build_training_arguments(spec, None, out, has_validation=False, use_cpu=True)
    args.save_strategy = SaveStrategy.NO
    trainer = build_trainer(spec, loaded.model, loaded.tokenizer, args, train, None)
    trainer.decay_ratio = spec.training.decay_ratio  # as rmspec.train.run sets it
    counter = CountingCollator(trainer.data_collator)
    trainer.data_collator = counter
    head = score_head(loaded.model)
    extra = {
        "packing": trainer.packing[0],
        "head_std": float(head.weight.std()) if head is not None else None,
        "pad_token": loaded.tokenizer.pad_token,
        "pooled": pooled_tokens(loaded.tokenizer, validation, loaded.tokenizer.pad_token_id),
    }
    return _train_and_measure("rmspec", trainer, counter, validation, True, extra)


def run_trl(data: Path, settings: dict, seed: int | None, out: Path) -> dict:
    import torch
    from datasets import load_from_disk
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
    from trl import RewardTrainer
    from trl.trainer.reward_trainer import DataCollatorForPreference

    from rmspec.train.sampling import SeededRandomSampler

    spec = load(settings, seed).spec
    path = model_path(settings["model"])
    tok = AutoTokenizer.from_pretrained(path)
    if tok.eos_token is None:
        tok.eos_token = "[SEP]"  # TRL needs an eos token; BERT tokenizers have none
    columns = ["chosen_input_ids", "rejected_input_ids"]
    train = load_from_disk(str(data / "train")).select_columns(columns)
    train = train.rename_columns({"chosen_input_ids": "chosen_ids", "rejected_input_ids": "rejected_ids"})
    validation = load_from_disk(str(data / "validation"))
    kwargs = {}
    if settings.get("quality"):
        set_seed(spec.training.seed)  # the score head transformers creates draws from torch's generator
        kwargs = {"dtype": torch.float32, "attn_implementation": "sdpa"}
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, **kwargs)
    config = trl_config(spec, out, settings)
    trainer_class = RewardTrainer
    if settings.get("quality"):

        class SameOrderRewardTrainer(RewardTrainer):
            """TRL's RewardTrainer drawing its batches with rmspec's seeded sampler: both see the same batches."""

            def _get_train_sampler(self, train_dataset=None):
                dataset = train_dataset if train_dataset is not None else self.train_dataset
                return SeededRandomSampler(len(dataset), self.args.seed)

        trainer_class = SameOrderRewardTrainer
    counter = CountingCollator(
        DataCollatorForPreference(pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    )
    trainer = trainer_class(model=model, args=config, train_dataset=train, processing_class=tok, data_collator=counter)
    if len(trainer.train_dataset) != len(train):
        raise SystemExit(f"TRL kept {len(trainer.train_dataset)} of {len(train)} training pairs (max_length filter)")
    counter.inner.pad_token_id = tok.pad_token_id  # TRL settles the pad token in __init__
    extra = {
        "packing": "off",
        "head_std": float(model.score.weight.std()) if hasattr(model, "score") else None,
        "pad_token": tok.pad_token,
        "pooled": pooled_tokens(tok, validation, model.config.pad_token_id),
    }
    return _train_and_measure("trl", trainer, counter, validation, False, extra)


def step_clock():
    """A TrainerCallback noting the clock at the start of training and the end of every optimizer step."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.ends: list[float] = []

        def on_train_begin(self, args, state, control, **kwargs):
            self.ends = [time.perf_counter()]

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

    return StepClock()


def _train_and_measure(
    name: str, trainer, counter: CountingCollator, validation, token_types: bool, extra: dict
) -> dict:
    load_start = os.getloadavg()[0]
    clock = step_clock()
    trainer.add_callback(clock)
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    right = held_out(trainer.model, validation, token_types)
    eval_seconds = time.perf_counter() - start
    steps = trainer.state.global_step
    pairs = steps * trainer.args.per_device_train_batch_size
    logs = [h for h in trainer.state.log_history if "loss" in h and "step" in h]
    return {
        "trainer": name,
        "seed": trainer.args.seed,
        "steps": steps,
        "train_seconds": seconds,
        "eval_seconds": eval_seconds,
        "step_seconds": [round(b - a, 2) for a, b in zip(clock.ends, clock.ends[1:])],
        "pairs_per_second": pairs / seconds,
        "tokens_per_second": counter.real / seconds,
        "padding_share": 1 - counter.real / counter.slots if counter.slots else 0.0,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "held_out_accuracy": sum(right) / len(right),
        "held_out_right": "".join(map(str, right)),
        "losses": [[h["step"], h["loss"]] for h in logs],
        "learning_rates": [[h["step"], h.get("learning_rate")] for h in logs],
        "optim": str(getattr(trainer.args.optim, "value", trainer.args.optim)),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        **extra,
    }


def child(which: str, data: Path, settings: dict, seed: int | None) -> None:
    import torch

    torch.manual_seed(0)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        result = (run_rmspec if which == "rmspec" else run_trl)(data, settings, seed, Path(out))
    result["load_before"] = load_before
    # Each run's figures also land beside the data, so a long run interrupted part-way keeps the finished ones
    # (--render turns such a folder into the table).
    (data / f"result-{which}-{seed}.json").write_text(json.dumps({"settings": settings, "result": result}))
    print("RESULT " + json.dumps(result), flush=True)


def render(folder: Path, out: Path, log: Path | None = None) -> None:
    """The quality table from the result-*.json files that children left in ``folder`` (an interrupted run);
    runs the parent's ``log`` reports (its "trainer {...}" lines) and no file holds are added from there."""
    import ast

    saved = [json.loads(p.read_text()) for p in sorted(folder.glob("result-*.json"))]
    if not saved:
        sys.exit(f"no result-*.json in {folder}")
    settings = saved[0]["settings"]
    found = [s["result"] for s in saved]
    for line in log.read_text().splitlines() if log else []:
        name, _, rest = line.partition(" ")
        if name in ("rmspec", "trl") and rest.startswith("{"):
            brief = ast.literal_eval(rest)
            if not any(r["trainer"] == brief["trainer"] and r["seed"] == brief["seed"] for r in found):
                found.append(brief)
    runs = sorted(found, key=lambda r: (r["seed"], r["trainer"] != "trl"))
    seeds = sorted({r["seed"] for r in runs})
    complete = [s for s in seeds if {r["trainer"] for r in runs if r["seed"] == s} == {"rmspec", "trl"}]
    runs = [r for r in runs if r["seed"] in complete]
    with tempfile.TemporaryDirectory() as tmp:
        report = prepare_data(Path(tmp), settings)
    write_quality(out, runs, report, settings, "(rendered from saved runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-steps", "--steps", type=int, default=None, help="optimizer steps (default: one epoch)")
    parser.add_argument("--model", default=MODEL, help="model id, folder or packaged:NAME (default: MiniLM)")
    parser.add_argument("--spec", default=str(SPEC), help="spec giving the data and the settings the options leave")
    parser.add_argument("--seeds", help="comma list: quality mode, one run of each trainer per seed")
    parser.add_argument("--batch", type=int, help="pairs per optimizer step (default: the spec's)")
    parser.add_argument("--lr", type=float, help="peak learning rate (default: the spec's)")
    parser.add_argument("--max-length", type=int, help="tokens per sequence (default: the spec's)")
    parser.add_argument("--eval-rows", type=int, help="evaluate on a fixed seeded subset of this many validation pairs")
    parser.add_argument(
        "--group-by-length",
        action="store_true",
        help="quality mode: rmspec groups by length (TRL then sees other batches)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="the table (default: bench/results/train_vs_trl.md, or quality_vs_trl.md with --seeds)",
    )
    parser.add_argument("--one", choices=["rmspec", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--order", default="trl,rmspec", help="which trainer runs first (comma list)")
    parser.add_argument("--render", help="write the quality table from the result-*.json files of this folder")
    parser.add_argument("--log", help="with --render: the run's log, for runs whose result file is missing")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `rmspec run` sets for CPU runs; both children get it
    if args.one:
        child(args.one, Path(args.data), json.loads(args.settings), args.seed)
        return
    if args.render:
        out = Path(args.out or REPO / "bench" / "results" / "quality_vs_trl.md")
        render(Path(args.render), out, Path(args.log) if args.log else None)
        return

    settings = {
        "model": args.model,
        "spec": str(Path(args.spec).resolve()),
        "max_steps": args.max_steps,
        "batch": args.batch,
        "learning_rate": args.lr,
        "max_length": args.max_length,
        "eval_rows": args.eval_rows,
        "quality": bool(args.seeds),
        "group_by_length": args.group_by_length,
    }
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [None]
    default_out = "quality_vs_trl.md" if args.seeds else "train_vs_trl.md"
    out = Path(args.out or REPO / "bench" / "results" / default_out)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        report = prepare_data(data, settings)
        runs = []
        for seed in seeds:
            for which in args.order.split(","):
                cmd = [
                    sys.executable,
                    __file__,
                    "--one",
                    which,
                    "--data",
                    str(data),
                    "--settings",
                    json.dumps(settings),
                ]
                cmd += ["--seed", str(seed)] if seed is not None else []
                load_before = os.getloadavg()[0]
                done = subprocess.run(cmd, capture_output=True, text=True)
                line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
                if done.returncode != 0 or not line:
                    sys.exit(f"{which} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
                result = json.loads(line[0][len("RESULT ") :])
                result["load_before"] = load_before
                runs.append(result)
                brief = {
                    k: v
                    for k, v in result.items()
                    if k not in ("held_out_right", "losses", "learning_rates", "step_seconds")
                }
                print(which, brief, flush=True)
    if args.seeds:
        write_quality(out, runs, report, settings, started)
    else:
        write_table(out, {r["trainer"]: r for r in runs}, report, args.max_steps)


def write_table(path: Path, results: dict, report: dict, max_steps: int | None) -> None:
    r, t = results["rmspec"], results["trl"]
    rows = [
        ("optimizer steps", "{:d}", "steps"),
        ("training time (s)", "{:.1f}", "train_seconds"),
        ("pairs / s", "{:.2f}", "pairs_per_second"),
        ("real tokens / s", "{:.0f}", "tokens_per_second"),
        ("padding share of token slots", "{:.1%}", "padding_share"),
        ("peak RSS (GiB)", "{:.2f}", "peak_rss_gb"),
        ("held-out accuracy", "{:.3f}", "held_out_accuracy"),
        ("1-min load average at start", "{:.1f}", "load_before"),
    ]
    lines = [
        "# rmspec vs TRL RewardTrainer (MiniLM, demo preferences, CPU)",
        "",
        f"Command: `python bench/trl_vs_rmspec.py{f' --max-steps {max_steps}' if max_steps else ''}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores (shared), "
        f"torch threads 2; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  ",
        f"Data: {report.get('splits')} pairs, length-heuristic accuracy {report.get('length_heuristic_accuracy')}  ",
        "Settings (both): fp32, no gradient checkpointing, 16 pairs per step, lr 1e-4 linear, 5% warmup, seed 42, "
        "max_length 256, dropout off, same token ids.",
        "",
        "| | rmspec | TRL 1.16 RewardTrainer |",
        "|---|---:|---:|",
    ]
    for label, fmt, key in rows:
        lines.append(f"| {label} | {fmt.format(r[key])} | {fmt.format(t[key])} |")
    ratio = r["pairs_per_second"] / t["pairs_per_second"]
    lines += [
        "",
        f"**rmspec / TRL pairs per second: {ratio:.2f}x**; held-out accuracy "
        f"{r['held_out_accuracy']:.3f} vs {t['held_out_accuracy']:.3f}.",
        "",
        "Where the difference comes from: rmspec batches pairs of similar length (length-grouped sampler, "
        "seeded per epoch) so far fewer padding slots are computed; both pad dynamically to the longest "
        "sequence of the batch and run chosen and rejected in one forward pass. rmspec also passes BERT's "
        "segment ids (prompt = 0, response = 1) that TRL's collator drops.",
        "",
        "The machine is shared by several engineers (see the load average): absolute figures move with the "
        "load, so both trainers run back to back in one invocation and the ratio is the figure to read.",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print(path.read_text())


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and its standard error (sample standard deviation / sqrt(n); nan for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def paired_se(a: str, b: str) -> float:
    """Standard error of the accuracy difference of two models on the same rows (per-row differences)."""
    diffs = [int(x) - int(y) for x, y in zip(a, b)]
    mean, se = mean_se(diffs)
    return se


def data_source(spec, spec_file: str) -> str:
    """Where the data of ``spec`` come from and how validation is held out, in words."""
    d = spec.data

    def files(source) -> str:
        return ", ".join(Path(p).name for p in getattr(source, "paths", None) or []) or source.kind

    split = d.split
    if split.validation_source is not None:
        held = f"validation from {files(split.validation_source)}"
    else:
        by = f" by {split.stratify_by}" if split.stratify_by else ""
        held = f"{split.validation_fraction:.0%} held out{by}, split seed {split.seed}"
    return f"{Path(spec_file).name}'s data section ({files(d.source)}; {held})"


def write_quality(path: Path, runs: list[dict], report: dict, settings: dict, started: str) -> None:
    import shlex

    import torch
    import transformers
    import trl

    by = {(r["trainer"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    rm = [by["rmspec", s] for s in seeds]
    tr = [by["trl", s] for s in seeds]
    for r in runs:  # a run known only from the parent's log line (--render --log) has no per-row or per-step detail
        for key in ("losses", "learning_rates", "step_seconds"):
            r.setdefault(key, [])
        r.setdefault("held_out_right", None)
    detailed = [r for r in runs if r["held_out_right"]]
    n = len(detailed[0]["held_out_right"]) if detailed else report["evaluated"]
    acc_r, se_r = mean_se([r["held_out_accuracy"] for r in rm])
    acc_t, se_t = mean_se([r["held_out_accuracy"] for r in tr])
    diffs = [a["held_out_accuracy"] - b["held_out_accuracy"] for a, b in zip(rm, tr)]
    diff, diff_se = mean_se(diffs)
    pair_ses = [
        paired_se(a["held_out_right"], b["held_out_right"])
        if a["held_out_right"] and b["held_out_right"]
        else float("nan")
        for a, b in zip(rm, tr)
    ]
    known = [x for x in pair_ses if not math.isnan(x)]
    eval_se = math.sqrt(sum(x * x for x in known)) / len(known) if known else float("nan")  # evaluation noise alone
    noise = max((x for x in (diff_se, eval_se) if not math.isnan(x)), default=0.0)
    if abs(diff) <= 2 * noise:
        verdict = f"within the noise (|difference| {abs(diff):.3f} <= 2 s.e. = {2 * noise:.3f})"
    else:
        side = "above" if diff > 0 else "below"
        verdict = f"rmspec {side} TRL outside the noise (|difference| {abs(diff):.3f} > 2 s.e. = {2 * noise:.3f})"
    binom = lambda p: math.sqrt(p * (1 - p) / n)  # noqa: E731
    argv = ["--model", settings["model"], "--seeds", ",".join(map(str, seeds))]
    if Path(settings["spec"]).resolve() != SPEC.resolve():
        argv += ["--spec", os.path.relpath(settings["spec"], REPO)]
    for flag, key in (("--steps", "max_steps"), ("--batch", "batch"), ("--lr", "learning_rate")):
        argv += [flag, f"{settings[key]:g}"] if settings.get(key) is not None else []
    for flag, key in (("--max-length", "max_length"), ("--eval-rows", "eval_rows")):
        argv += [flag, str(settings[key])] if settings.get(key) is not None else []
    argv += ["--group-by-length"] if settings.get("group_by_length") else []
    argv += ["--out", os.path.relpath(path.resolve(), REPO)]
    command = "HF_HUB_OFFLINE=1 .venv/bin/python bench/trl_vs_rmspec.py " + shlex.join(argv)
    model_dir = Path(model_path(settings["model"]))
    provenance = model_dir / "rmspec_gguf.json"
    note = ""
    if provenance.exists():
        info = json.loads(provenance.read_text())
        note = f" ({info.get('note', '')}; {info.get('quantisation', '')}, {Path(info.get('file', '')).name})"
    spec = load(settings, seeds[0]).spec
    t = spec.training
    splits = report.get("splits") or {}
    loads = [r["load_before"] for r in runs] + [r["load_end"] for r in runs]
    lines = [
        f"# rmspec vs TRL RewardTrainer: held-out accuracy of a Bradley-Terry reward model on {settings['model']} "
        f"({len(seeds)} seed{'s' if len(seeds) > 1 else ''}, CPU)",
        "",
        f"Command: `{command}`  ",
        f"Started {started}, written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; every figure below "
        f"comes from this run (the raw figures, per-row results included, are in `{path.with_suffix('.json').name}`).  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores shared with other engineers, torch on "
        f"{torch.get_num_threads()} threads; 1-minute load average {min(loads):.1f}-{max(loads):.1f} over the runs "
        "(per run below). torch "
        f"{torch.__version__}, transformers {transformers.__version__}, TRL {trl.__version__}; fp32, SDPA.  ",
        f"Model: {settings['model']}{note}; rmspec loads it with its own pad token and a fresh score head "
        f"normal(0, 1/sqrt(hidden+1)), TRL with AutoModelForSequenceClassification (transformers' default head "
        "init) and the tokenizer's pad token, as each trainer does by default.  ",
        f"Data: {data_source(spec, settings['spec'])}: {splits.get('train')} training pairs, {splits.get('validation')} "
        f"validation pairs, laid out by rmspec.data.prepare with the model's tokenizer; both trainers get these token "
        f"ids. Evaluated on {n} validation pairs"
        + (
            f" (a fixed subset: the split shuffled with seed 0, its first {n}; the same rows for every run)"
            if n < (splits.get("validation") or n)
            else " (all)"
        )
        + f"; the length heuristic (longer response wins, ties half) scores "
        f"{report['evaluated_length_heuristic']} on them.  ",
        f"Settings, both trainers: {t.max_steps} steps of {t.global_batch_size} pairs (no accumulation), lr "
        f"{t.learning_rate:g} {t.lr_scheduler} with warmup {t.warmup_ratio:g} of the steps, optimizer "
        f"{rm[0]['optim']} (TRL: {tr[0]['optim']}), weight decay {t.weight_decay:g}, clipping {t.max_grad_norm:g}, "
        f"max_length {t.max_length}, dropout off, seeds {', '.join(map(str, seeds))} (the seed sets the batch order "
        "and the head init of both). The same batches in the same order: TRL draws them with rmspec's seeded "
        f"sampler, rmspec {'groups by length (so the batches differ)' if settings['group_by_length'] else 'without length grouping'}. "
        f"rmspec computes pairs {rm[0]['packing']} packed (each prompt once; exact to float rounding, "
        "tests/test_packing_exact.py), TRL unpacked. Each trainer runs in its own process, one after the other.",
        "",
        "## Held-out accuracy",
        "",
        "| seed | rmspec | TRL RewardTrainer | rmspec - TRL (paired s.e.) |",
        "|---|---:|---:|---:|",
    ]
    for s, a, b, ps in zip(seeds, rm, tr, pair_ses):
        pa, pb = a["held_out_accuracy"], b["held_out_accuracy"]
        paired = "n/a" if math.isnan(ps) else f"{ps:.4f}"
        lines.append(f"| {s} | {pa:.4f} ± {binom(pa):.4f} | {pb:.4f} ± {binom(pb):.4f} | {pa - pb:+.4f} ± {paired} |")
    lines += [
        f"| **mean ± s.e. across seeds** | **{acc_r:.4f} ± {se_r:.4f}** | **{acc_t:.4f} ± {se_t:.4f}** | "
        f"**{diff:+.4f} ± {diff_se:.4f}** |",
        "",
        f"Per run: accuracy ± binomial s.e. sqrt(p(1-p)/{n}). Per seed difference: ± the s.e. of the per-row "
        "differences (both models scored the same rows). Mean row: ± sample standard deviation over the seeds / "
        f"sqrt({len(seeds)}); the evaluation rows alone would give the mean difference ± {eval_se:.4f}.",
        "",
        f"**rmspec {acc_r:.3f} vs TRL {acc_t:.3f}: {verdict}.**",
        "",
    ]
    missing = [f"{r['trainer']} seed {r['seed']}" for r in runs if not r["held_out_right"]]
    if missing:
        lines += [
            f"Known from the run's log line only (accuracy, seconds, load; no per-row results or loss curve): "
            f"{', '.join(missing)}; its paired s.e. and loss cells are empty.",
            "",
        ]
    lines += [
        "## Loss curves",
        "",
        "Training loss (Bradley-Terry, -log sigmoid(r_chosen - r_rejected) over the batch), mean over the seeds; "
        "both trainers log every step, on the same batches.",
        "",
    ]
    steps = sorted({s for r in runs for s, _ in r["losses"]}) or [1]
    blocks = [[1]] + [[s for s in steps if lo < s <= lo + 10 and s > 1] for lo in range(0, max(steps), 10)]
    blocks = [b for b in blocks if b]
    lines += [
        "| steps | " + " | ".join(f"{b[0]}-{b[-1]}" if len(b) > 1 else f"{b[0]}" for b in blocks) + " |",
        "|---|" + "---:|" * len(blocks),
    ]
    for name, group in (("rmspec", rm), ("TRL", tr)):
        means = []
        for b in blocks:
            vals = [loss for r in group for s, loss in r["losses"] if s in b]
            means.append(f"{sum(vals) / len(vals):.4f}" if vals else "")
        lines.append(f"| {name} | " + " | ".join(means) + " |")
    lines += [
        "",
        "<details><summary>Loss and learning rate at every step, each seed</summary>",
        "",
        "| step | lr rmspec | lr TRL | "
        + " | ".join(f"rmspec s{s}" for s in seeds)
        + " | "
        + " | ".join(f"TRL s{s}" for s in seeds)
        + " |",
        "|---:|---:|---:|" + "---:|" * (2 * len(seeds)),
    ]
    for step in steps:
        lr_r = next((dict(map(tuple, r["learning_rates"])).get(step) for r in rm if r["learning_rates"]), None)
        lr_t = next((dict(map(tuple, r["learning_rates"])).get(step) for r in tr if r["learning_rates"]), None)
        cells = [lr_r, lr_t] + [dict(map(tuple, r["losses"])).get(step) for r in rm + tr]
        lines.append(
            f"| {step} | "
            + " | ".join("" if c is None else f"{c:.3g}" for c in cells[:2])
            + " | "
            + " | ".join("" if c is None else f"{c:.4f}" for c in cells[2:])
            + " |"
        )
    lines += [
        "",
        "</details>",
        "",
        "## What differs between the two, as each trainer has it",
        "",
        "| | rmspec | TRL RewardTrainer |",
        "|---|---|---|",
        f"| pad token | {rm[0]['pad_token']!r} | {tr[0]['pad_token']!r} |",
        "| token the head reads (evaluation rows, top 3) | "
        + ", ".join(f"{k}: {v}" for k, v in rm[0]["pooled"].items())
        + " | "
        + ", ".join(f"{k}: {v}" for k, v in tr[0]["pooled"].items())
        + " |",
        "| score head weight std at step 0 (per seed) | "
        + ", ".join(f"{r['head_std']:.4f}" for r in rm)
        + " | "
        + ", ".join(f"{r['head_std']:.4f}" for r in tr)
        + " |",
        "| loss at step 1 (per seed; same batch) | "
        + ", ".join(f"{r['losses'][0][1]:.4f}" if r["losses"] else "n/a" for r in rm)
        + " | "
        + ", ".join(f"{r['losses'][0][1]:.4f}" if r["losses"] else "n/a" for r in tr)
        + " |",
        f"| pairs computed | {rm[0]['packing']} packed | unpacked |",
        "",
        "## Runs",
        "",
        "Seconds are wall time on a shared machine with the load shown: they are not a speed claim "
        "(bench/results/train_vs_trl.md and decoder_vs_trl_smollm2.md measure speed).",
        "",
        "| seed | trainer | training s | s per step (median) | evaluation s | load before / at train start / at end "
        "| peak RSS GiB |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for r in runs:
        per_step = sorted(r["step_seconds"])[len(r["step_seconds"]) // 2] if r["step_seconds"] else float("nan")
        lines.append(
            f"| {r['seed']} | {r['trainer']} | {r['train_seconds']:.0f} | {per_step:.1f} | {r['eval_seconds']:.0f} | "
            f"{r['load_before']:.1f} / {r['load_start']:.1f} / {r['load_end']:.1f} | {r['peak_rss_gb']:.2f} |"
        )
    lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    raw = {"command": command, "started": started, "settings": settings, "data_report": report, "runs": runs}
    path.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
