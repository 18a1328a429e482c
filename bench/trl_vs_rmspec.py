"""rmspec vs TRL's RewardTrainer: the same model, data and settings, side by side in one run.

    python bench/trl_vs_rmspec.py [--max-steps N] [--out bench/results/train_vs_trl.md]

Model: the packaged all-MiniLM-L6-v2 (BERT, 22M). Data: specs/quickstart.yaml through
rmspec.data.prepare (the demo preferences; the same token ids go to both trainers). Settings:
fp32, no gradient checkpointing, batch 16 pairs, lr 1e-4 linear with 5% warmup, seed 42, one
epoch unless --max-steps. Each trainer runs in its own process (so peak RSS is its own), one
after the other; the parent writes the table.

Measured: pairs/s and real (non-pad) tokens/s over the training loop, the share of padding in
the token slots the model computed, peak RSS of the process, and held-out accuracy on the
validation split (chosen scored above rejected, ties wrong).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
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
        self.real += int(batch["attention_mask"].sum())
        self.slots += batch["attention_mask"].numel()
        return batch


def prepare_data(folder: Path) -> dict:
    from rmspec.data import prepare
    from rmspec.packaged import resolve_model_path
    from rmspec.spec import load_spec
    from rmspec.train.modeling import ensure_pad_token, load_tokenizer

    loaded = load_spec(SPEC)
    tok = load_tokenizer(resolve_model_path(MODEL))
    ensure_pad_token(tok)
    prepared = prepare(loaded, tok, cache_dir=folder / "cache")
    prepared.train.save_to_disk(str(folder / "train"))
    prepared.validation.save_to_disk(str(folder / "validation"))
    return prepared.report.to_json()


@__import__("torch").no_grad()
def held_out_accuracy(model, validation, use_token_types: bool) -> float:
    from rmspec.train.collators import PairCollator
    from rmspec.train.rewards import forward_scores

    model.eval()
    collate = PairCollator(model.config.pad_token_id)
    right = 0
    rows = [validation[i] for i in range(len(validation))]
    for i in range(0, len(rows), 32):
        batch = collate(rows[i : i + 32])
        types = batch.get("token_type_ids") if use_token_types else None
        scores = forward_scores(model, batch["input_ids"], batch["attention_mask"], types)[:, 0]
        half = scores.shape[0] // 2
        right += int((scores[:half] > scores[half:]).sum())
    return right / len(rows)


def run_rmspec(data: Path, max_steps: int | None, out: Path) -> dict:
    from datasets import load_from_disk
    from transformers.trainer_utils import SaveStrategy

    from rmspec.packaged import resolve_model_path
    from rmspec.spec import load_spec
    from rmspec.train.arguments import build_training_arguments
    from rmspec.train.factory import build_trainer
    from rmspec.train.modeling import load_model

    sets = [f"training.max_steps={max_steps}"] if max_steps else []
    spec = load_spec(SPEC, sets).spec
    train, validation = load_from_disk(str(data / "train")), load_from_disk(str(data / "validation"))
    loaded = load_model(resolve_model_path(MODEL), spec.approach, seed=spec.training.seed)
    args = build_training_arguments(spec, None, out, has_validation=False, use_cpu=True)
    args.save_strategy = SaveStrategy.NO
    trainer = build_trainer(spec, loaded.model, loaded.tokenizer, args, train, None)
    counter = CountingCollator(trainer.data_collator)
    trainer.data_collator = counter
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    return _result("rmspec", trainer, counter, seconds, held_out_accuracy(trainer.model, validation, True))


def run_trl(data: Path, max_steps: int | None, out: Path) -> dict:
    from datasets import load_from_disk
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer
    from trl.trainer.reward_trainer import DataCollatorForPreference

    from rmspec.packaged import resolve_model_path

    path = resolve_model_path(MODEL)
    tok = AutoTokenizer.from_pretrained(path)
    tok.eos_token = "[SEP]"  # TRL needs an eos token; BERT tokenizers have none
    columns = ["chosen_input_ids", "rejected_input_ids"]
    train = load_from_disk(str(data / "train")).select_columns(columns)
    train = train.rename_columns({"chosen_input_ids": "chosen_ids", "rejected_input_ids": "rejected_ids"})
    validation = load_from_disk(str(data / "validation"))
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    config = RewardConfig(
        output_dir=str(out),
        per_device_train_batch_size=16,
        learning_rate=1e-4,
        lr_scheduler_type="linear",
        warmup_steps=0.05,
        num_train_epochs=1,
        max_steps=max_steps or -1,
        seed=42,
        bf16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        max_length=256,
        report_to="none",
        save_strategy="no",
        logging_steps=10,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    counter = CountingCollator(DataCollatorForPreference(pad_token_id=tok.pad_token_id))
    trainer = RewardTrainer(model=model, args=config, train_dataset=train, processing_class=tok, data_collator=counter)
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    return _result("trl", trainer, counter, seconds, held_out_accuracy(trainer.model, validation, False))


def _result(name: str, trainer, counter: CountingCollator, seconds: float, accuracy: float) -> dict:
    steps = trainer.state.global_step
    pairs = steps * trainer.args.per_device_train_batch_size
    return {
        "trainer": name,
        "steps": steps,
        "train_seconds": seconds,
        "pairs_per_second": pairs / seconds,
        "tokens_per_second": counter.real / seconds,
        "padding_share": 1 - counter.real / counter.slots,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "held_out_accuracy": accuracy,
    }


def child(which: str, data: Path, max_steps: int | None) -> None:
    import torch

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as out:
        result = (run_rmspec if which == "rmspec" else run_trl)(data, max_steps, Path(out))
    print("RESULT " + json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-steps", type=int, default=None, help="optimizer steps (default: one epoch)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "train_vs_trl.md"))
    parser.add_argument("--one", choices=["rmspec", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--order", default="trl,rmspec", help="which trainer runs first (comma list)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `rmspec run` sets for CPU runs; both children get it
    if args.one:
        child(args.one, Path(args.data), args.max_steps)
        return

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        report = prepare_data(data)
        results = {}
        for which in args.order.split(","):
            cmd = [sys.executable, __file__, "--one", which, "--data", str(data)]
            if args.max_steps:
                cmd += ["--max-steps", str(args.max_steps)]
            load_before = os.getloadavg()[0]
            done = subprocess.run(cmd, capture_output=True, text=True)
            line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
            if done.returncode != 0 or not line:
                sys.exit(f"{which} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            results[which] = json.loads(line[0][len("RESULT ") :])
            results[which]["load_before"] = load_before
            print(which, results[which], flush=True)
    write_table(Path(args.out), results, report, args.max_steps)


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


if __name__ == "__main__":
    main()
