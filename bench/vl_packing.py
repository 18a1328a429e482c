"""Prompt-once packing with M-RoPE vs the unpacked two-sequence layout, on the same VLM and data.

Layouts (rmspec's own code paths, same model init, same batches, same optimizer):
- packed:   one row [prompt with image | chosen | rejected] per pair, the image encoded once
            (rmspec.train.vision_packing);
- unpacked: chosen and rejected as two sequences in one batch of 2B rows, each with its own copy
            of the image (rmspec.vision.collate.VisionPairCollator). This is the two-sequence layout
            TRL's RewardTrainer uses for text (TRL 1.16 has no image handling, so its layout is
            reproduced here with rmspec's VLM collator rather than run through TRL).

Timed: forward + backward + AdamW step on pre-collated batches (collation is reported apart: it is
the processor's work and runs in the data loader's workers). The two layouts alternate round by
round so machine load hits both alike; we report mean seconds per step and its standard error over
rounds, pairs/s, and the largest loss difference between the layouts at the same step (equal loss:
the same math, so the curves coincide).

    OMP_NUM_THREADS=1 python bench/vl_packing.py --rounds 3 --steps 8 --batch 8 --size 224
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from PIL import Image

from rmspec.train.vision_packing import VisionPackedPairCollator, packed_vision_pair_rewards
from rmspec.vision.collate import VisionEncoder, VisionPairCollator
from rmspec.vision.demo import COLOURS, QUESTION, answer
from rmspec.vision.images import decode_image  # noqa: F401  (the collators decode through it)
from rmspec.vision.models import reward_class
from rmspec.vision.processor import image_text
from rmspec.vision.tiny import build_processor, tiny_config


def make_rows(tokenizer, folder, n, size, seed):
    import random

    rng = random.Random(seed)
    names = sorted(COLOURS)
    rows = []
    for i in range(n):
        colour, wrong = rng.sample(names, 2)
        path = os.path.join(folder, f"{i}.png")
        Image.new("RGB", (size, size), COLOURS[colour]).save(path)
        prompt = f"<|im_start|>user\n<image>{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
        ids = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
        rows.append(
            {
                "chosen_input_ids": ids(prompt + answer(colour) + "<|im_end|>\n"),
                "rejected_input_ids": ids(prompt + answer(wrong) + "<|im_end|>\n"),
                "images": [path],
                "margin": 0.0,
            }
        )
    return rows


def step_fn(packed):
    def rewards(model, batch):
        if packed:
            return packed_vision_pair_rewards(model, batch)
        scores = model(**{k: v for k, v in batch.items() if k != "margin"}).logits[:, 0]
        half = scores.shape[0] // 2
        return scores[:half], scores[half:]

    return rewards


def run(model, batches, rewards, lr=1e-3):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, times = [], []
    for batch in batches:
        t0 = time.perf_counter()
        chosen, rejected = rewards(model, batch)
        loss = -F.logsigmoid(chosen - rejected).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return losses, times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    import tempfile

    processor = build_processor(max_pixels=args.size * args.size)
    config = tiny_config(processor.tokenizer, hidden=args.hidden, layers=args.layers, vision_depth=4, vision_width=64)
    base = reward_class(config)(config).train()
    params = sum(p.numel() for p in base.parameters())
    encoder = VisionEncoder(processor, image_text(config, processor))
    with tempfile.TemporaryDirectory() as folder:
        rows = make_rows(processor.tokenizer, folder, args.steps * args.batch, args.size, seed=1)
        chunks = [rows[i : i + args.batch] for i in range(0, len(rows), args.batch)]
        t0 = time.perf_counter()
        packed_batches = [VisionPackedPairCollator(encoder)(c) for c in chunks]
        t_packed_collate = (time.perf_counter() - t0) / len(chunks)
        t0 = time.perf_counter()
        plain_batches = [VisionPairCollator(encoder)(c) for c in chunks]
        t_plain_collate = (time.perf_counter() - t0) / len(chunks)
    per_round = {"packed": [], "unpacked": []}
    loss_gap, first_gap, losses_seen = 0.0, 0.0, {}
    for _ in range(args.rounds):
        results = {}
        for name, batches in (("packed", packed_batches), ("unpacked", plain_batches)):
            model = copy.deepcopy(base)
            losses, times = run(model, batches, step_fn(name == "packed"))
            per_round[name].append(statistics.mean(times[1:]))  # the first step warms up
            results[name] = losses
        loss_gap = max(loss_gap, max(abs(a - b) for a, b in zip(results["packed"], results["unpacked"])))
        first_gap = max(first_gap, abs(results["packed"][0] - results["unpacked"][0]))
        losses_seen = results
    vision_rows = {
        "packed": packed_batches[0]["pixel_values"].shape[0],
        "unpacked": plain_batches[0]["pixel_values"].shape[0],
    }
    tokens = {"packed": packed_batches[0]["input_ids"].numel(), "unpacked": plain_batches[0]["input_ids"].numel()}
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, torch {torch.__version__}, threads {args.threads}"
    )
    print(
        f"model: tiny Qwen2-VL, {params / 1e6:.2f}M parameters (hidden {args.hidden}, {args.layers} layers, vision depth 4 width 64)"
    )
    print(
        f"data: {args.batch} pairs per step, {args.size}x{args.size} one-colour pictures, {args.steps} steps x {args.rounds} rounds"
    )
    for name in ("packed", "unpacked"):
        values = per_round[name]
        mean = statistics.mean(values)
        se = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan")
        print(
            f"{name:9s}: {mean:.4f} s/step (se {se:.4f}), {args.batch / mean:.1f} pairs/s, "
            f"vision rows/step {vision_rows[name]}, text slots/step {tokens[name]}"
        )
    ratio = statistics.mean(per_round["unpacked"]) / statistics.mean(per_round["packed"])
    per_round_ratio = [u / p for u, p in zip(per_round["unpacked"], per_round["packed"])]
    print(f"speed-up packed vs unpacked: {ratio:.2f}x (per round: {', '.join(f'{r:.2f}' for r in per_round_ratio)})")
    print(f"loss difference at the first step (same weights): {first_gap:.2e}; largest over the run: {loss_gap:.2e}")
    print("losses, packed:   " + " ".join(f"{v:.4f}" for v in losses_seen["packed"]))
    print("losses, unpacked: " + " ".join(f"{v:.4f}" for v in losses_seen["unpacked"]))
    print(f"collation per batch: packed {t_packed_collate:.3f} s, unpacked {t_plain_collate:.3f} s")


if __name__ == "__main__":
    main()
