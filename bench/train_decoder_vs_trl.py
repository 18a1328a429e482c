"""A decoder reward model on prompt-heavy multi-turn pairs: rmspec packed vs unpacked vs TRL.

Everything is built here, offline: a byte-level BPE tokenizer (tokenizers) with a ChatML-style
chat template, a random-init Qwen2-shaped decoder (about 10M parameters), and multi-turn
preference data whose prompts are most of the tokens (the chosen reply carries a marker the
model can learn). Pairs are laid out by rmspec's own data layout (rmspec.data.layout), so the
three trainers see the same token ids. Each trainer runs in its own process (peak RSS is its
own) with the same settings: batch 8 pairs, lr 3e-4 linear, fp32, N steps, no length grouping
(so packed and unpacked see the same batches and their loss curves can be compared step by step).

    HF_HUB_OFFLINE=1 python bench/train_decoder_vs_trl.py [--steps 12] [--out bench/results/train_decoder_vs_trl.md]

On 2 shared cores at load 8-12 a step of 8 pairs takes 20-40 s per trainer: --steps 5 ran in 9 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = [f"{a}{b}" for a in "bcdfghjklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "ou", "ee")]
BATCH, LR, MAX_LENGTH = 8, 3e-4, 512
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build_decoder(folder: Path, texts: list[str]):
    """A byte-level BPE tokenizer trained on ``texts`` with the ChatML template, and a random-init
    Qwen2-shaped decoder (about 10M parameters), saved under ``folder``; returns the tokenizer."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        texts,
        vocab_size=2000,
        min_frequency=2,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = CHATML
    tok.save_pretrained(folder)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=384,
        intermediate_size=1024,
        num_hidden_layers=6,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return tok


def build(folder: Path, pairs: int) -> None:
    """Tokenizer, model and tokenized pairs under ``folder``."""
    from datasets import Dataset

    from rmspec.data.layout import Layout

    rng = random.Random(0)
    tok = build_decoder(folder / "model", [sentence(rng, 50) for _ in range(2000)])
    prompts, chosen, rejected = [], [], []
    for _ in range(pairs):
        turns = []
        for t in range(rng.choice([3, 5, 7])):  # user, assistant, ..., user
            turns.append({"role": "user" if t % 2 == 0 else "assistant", "content": sentence(rng, rng.randint(25, 45))})
        prompts.append(turns)
        good, bad = sentence(rng, rng.randint(8, 20)), sentence(rng, rng.randint(8, 20))
        chosen.append("ok " + good)  # the learnable marker
        rejected.append(bad)
    layout = Layout(tok)
    c_segs, r_segs = layout.segments_many(prompts, [chosen, rejected])
    rows = [
        {
            "chosen_input_ids": c.ids(),
            "rejected_input_ids": r.ids(),
            "margin": 0.0,
            "prompt_tokens": len(c.head) + len(c.prompt) + len(c.mid),
        }
        for c, r in zip(c_segs, r_segs)
    ]
    Dataset.from_list(rows).save_to_disk(str(folder / "pairs"))


class Counting:
    """Counts the token slots (padding included) each batch makes the model compute."""

    def __init__(self, inner):
        self.inner, self.slots, self.pairs = inner, 0, 0

    def __call__(self, rows):
        batch = self.inner(rows)
        self.slots += batch["input_ids"].numel()
        self.pairs += len(rows)
        return batch


def step_timer():
    """A TrainerCallback that records the clock at the end of every optimizer step: the first step
    carries one-off costs (allocator warm-up, autograd graph set-up), so steady pairs/s leaves it out."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.ends: list[float] = []  # the train start, then the end of every step

        def on_train_begin(self, args, state, control, **kwargs):
            self.ends = [time.perf_counter()]

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

    return StepTimer()


def run_rmspec(folder: Path, steps: int, packing: str, out: Path, group_by_length: bool = False) -> dict:
    from datasets import load_from_disk

    from rmspec.spec import load_spec
    from rmspec.train.arguments import build_training_arguments
    from rmspec.train.factory import build_trainer
    from rmspec.train.modeling import load_model

    spec_path = out / "spec.yaml"
    spec_path.write_text(
        "version: 1\nname: bench\n"
        f"model: {{name_or_path: {folder / 'model'}, dtype: float32, attn_implementation: sdpa}}\n"
        "data: {source: {kind: files, paths: [x.jsonl]}, mapping: {preset: pairs}}\n"
        "approach: {kind: bradley_terry}\n"
        f"training: {{max_steps: {steps}, learning_rate: {LR}, global_batch_size: {BATCH}, micro_batch_size: {BATCH}, "
        f"logging_steps: 1, seed: 1, group_by_length: {str(group_by_length).lower()}, packing: {packing}, max_length: {MAX_LENGTH}}}\n"
        "hardware: {device: cpu}\n"
    )
    spec = load_spec(spec_path).spec
    loaded = load_model(str(folder / "model"), spec.approach, seed=1, attn_implementation="sdpa")
    train = load_from_disk(str(folder / "pairs"))
    args = build_training_arguments(spec, None, out / "ckpt", has_validation=False, use_cpu=True)
    args.save_strategy, args.report_to, args.disable_tqdm = "no", [], True
    trainer = build_trainer(spec, loaded.model, loaded.tokenizer, args, train, None)
    counter = Counting(trainer.data_collator)
    trainer.data_collator = counter
    timer = step_timer()
    trainer.add_callback(timer)
    start = time.perf_counter()
    trainer.train()
    return _result(f"rmspec {trainer.packing[0]}", trainer, counter, time.perf_counter() - start, timer.ends)


def run_trl(folder: Path, steps: int, out: Path) -> dict:
    from datasets import load_from_disk
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer
    from trl.trainer.reward_trainer import DataCollatorForPreference

    tok = AutoTokenizer.from_pretrained(folder / "model")
    train = load_from_disk(str(folder / "pairs")).select_columns(["chosen_input_ids", "rejected_input_ids"])
    train = train.rename_columns({"chosen_input_ids": "chosen_ids", "rejected_input_ids": "rejected_ids"})
    model = AutoModelForSequenceClassification.from_pretrained(
        folder / "model", num_labels=1, attn_implementation="sdpa"
    )
    model.config.pad_token_id = tok.pad_token_id
    config = RewardConfig(
        output_dir=str(out),
        per_device_train_batch_size=BATCH,
        learning_rate=LR,
        lr_scheduler_type="linear",
        max_steps=steps,
        seed=1,
        bf16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        max_length=MAX_LENGTH,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    counter = Counting(DataCollatorForPreference(pad_token_id=tok.pad_token_id))
    timer = step_timer()
    trainer = RewardTrainer(
        model=model, args=config, train_dataset=train, processing_class=tok, data_collator=counter, callbacks=[timer]
    )
    start = time.perf_counter()
    trainer.train()
    return _result("TRL RewardTrainer", trainer, counter, time.perf_counter() - start, timer.ends)


def _result(name: str, trainer, counter: Counting, seconds: float, ends: list[float]) -> dict:
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    step_seconds = [b - a for a, b in zip(ends, ends[1:])]
    # Steady speed: steps 2..N (the first carries one-off set-up costs).
    steady = BATCH * (len(step_seconds) - 1) / sum(step_seconds[1:]) if len(step_seconds) > 1 else float("nan")
    return {
        "trainer": name,
        "steps": trainer.state.global_step,
        "seconds": seconds,
        "step_seconds": [round(x, 2) for x in step_seconds],
        "pairs_per_second": counter.pairs / seconds,
        "steady_pairs_per_second": steady,
        "tokens_per_pair": counter.slots / counter.pairs,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "losses": losses,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "train_decoder_vs_trl.md"))
    parser.add_argument(
        "--reverse",
        action="store_true",
        help="run TRL first and packed last (on a shared machine the load drifts: run both orders)",
    )
    parser.add_argument(
        "--rmspec-grouping",
        action="store_true",
        help="rmspec's default length-grouped batches for the two rmspec trainers (TRL keeps its own default, off)",
    )
    parser.add_argument("--one")
    parser.add_argument("--folder")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.one:
        import torch

        torch.set_num_threads(2)
        with tempfile.TemporaryDirectory() as out:
            folder = Path(args.folder)
            result = (
                run_trl(folder, args.steps, Path(out))
                if args.one == "trl"
                else run_rmspec(folder, args.steps, args.one, Path(out), group_by_length=args.rmspec_grouping)
            )
        print("RESULT " + json.dumps(result), flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build(folder, pairs=BATCH * args.steps)
        from datasets import load_from_disk

        data = load_from_disk(str(folder / "pairs"))
        total = sum(len(c) + len(r) for c, r in zip(data["chosen_input_ids"], data["rejected_input_ids"]))
        prompt_share = sum(2 * p for p in data["prompt_tokens"]) / total
        load_before = os.getloadavg()
        results = []
        order = ("shared_prefix", "off", "trl")
        for which in reversed(order) if args.reverse else order:
            cmd = [sys.executable, __file__, "--one", which, "--folder", str(folder), "--steps", str(args.steps)]
            cmd += ["--rmspec-grouping"] if args.rmspec_grouping else []
            load_at_start = os.getloadavg()[0]
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
            line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                raise SystemExit(f"{which} failed:\n{out.stderr[-3000:]}")
            results.append({**json.loads(line[-1][len("RESULT ") :]), "load_at_start": load_at_start})
        load_after = os.getloadavg()
        from transformers import AutoModelForSequenceClassification

        params = sum(
            p.numel()
            for p in AutoModelForSequenceClassification.from_pretrained(folder / "model", num_labels=1).parameters()
        )
    if args.reverse:  # the table keeps one order: packed, unpacked, TRL
        results.reverse()
    write(
        Path(args.out),
        results,
        args.steps,
        prompt_share,
        params,
        len(data),
        load_before,
        load_after,
        args.reverse,
        args.rmspec_grouping,
    )


def write(
    path: Path,
    results: list[dict],
    steps: int,
    prompt_share: float,
    params: int,
    pairs: int,
    load_before,
    load_after,
    reverse: bool = False,
    grouping: bool = False,
) -> None:
    import platform

    import torch
    import transformers
    import trl

    trl_speed, trl_steady = results[-1]["pairs_per_second"], results[-1]["steady_pairs_per_second"]
    starts = ", ".join(f"{r['load_at_start']:.1f}" for r in results)
    packed, plain = results[0]["losses"], results[1]["losses"]
    gap = max(abs(a - b) for a, b in zip(packed, plain)) if packed and plain else float("nan")
    lines = [
        "# Decoder reward model: rmspec packed vs unpacked vs TRL RewardTrainer (CPU)",
        "",
        f"Command: `HF_HUB_OFFLINE=1 .venv/bin/python bench/train_decoder_vs_trl.py --steps {steps}"
        f"{' --reverse' if reverse else ''}{' --rmspec-grouping' if grouping else ''}` (trainers run {'TRL, unpacked, packed' if reverse else 'packed, unpacked, TRL'}, "
        "one after the other)  ",
        f"Machine: {os.cpu_count()} CPU cores shared with other engineers' jobs ({platform.machine()}, torch on 2 "
        f"threads), 1-minute load average {load_before[0]:.1f} before and {load_after[0]:.1f} after the run "
        f"({starts} as the packed, unpacked and TRL trainers started); "
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"TRL {trl.__version__}; fp32, SDPA.  ",
        f"Model: random-init Qwen2-shaped decoder, {params / 1e6:.1f}M parameters (hidden 384, 6 layers, GQA 6/2), "
        "byte-level BPE (2,000 tokens) with a ChatML template, built by the bench.  ",
        f"Data: {pairs} multi-turn pairs (3, 5 or 7 turns before the reply) generated by the bench; prompts are "
        f"{prompt_share:.0%} of the tokens of the two sequences of a pair.  ",
        f"Settings, all three: {BATCH} pairs per step, {steps} steps, lr {LR:g} linear, seed 1, max_length "
        f"{MAX_LENGTH}, "
        + ("rmspec length-grouped (its default), TRL not (its default)" if grouping else "no length grouping")
        + ", no gradient checkpointing; each trainer in its own process.",
        "",
        "| | pairs/s, all steps | vs TRL | pairs/s, steps 2..N | vs TRL | tokens computed per pair | peak RSS GiB "
        "| loss at step 1 | loss at the last step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['trainer']} | {r['pairs_per_second']:.3f} | {r['pairs_per_second'] / trl_speed:.2f}x | "
            f"{r['steady_pairs_per_second']:.3f} | {r['steady_pairs_per_second'] / trl_steady:.2f}x | "
            f"{r['tokens_per_pair']:.0f} | {r['peak_rss_gb']:.2f} | {r['losses'][0]:.4f} | "
            f"{r['losses'][-1]:.4f} |"
        )
    lines += [
        "",
        "Tokens computed per pair: the token slots of the batches the model ran (padding included), over the "
        "pairs. pairs/s, all steps: pairs over the wall time of trainer.train(); steps 2..N leaves out the first "
        "step's one-off costs. Seconds per step: "
        + "; ".join(f"{r['trainer']}: " + ", ".join(f"{x:.1f}" for x in r["step_seconds"]) for r in results)
        + ".",
        "",
        f"Packed vs unpacked loss, largest difference over the {len(packed)} logged steps: {gap:.2e} "
        + (
            "(length grouping sorts packed batches by P+C+R and unpacked ones by the longer sequence, so the "
            "batches differ and so do the curves)."
            if grouping
            else "(same batches; the rewards are exact to float rounding, tests/test_packing_exact.py)."
        ),
        "TRL's loss differs from rmspec's from step 1: its score head starts from transformers' default "
        "initialisation, rmspec's from normal(0, 1/sqrt(hidden+1)) with dropout off (rmspec.train.modeling).",
        "",
        "Loss per step: "
        + "; ".join(f"{r['trainer']}: " + ", ".join(f"{x:.3f}" for x in r["losses"]) for r in results),
    ]
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
