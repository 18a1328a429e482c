"""Benchmark: the VLM collator's time per batch, before and after issue 47 (a picture's place an id).

Before (e8e6340): each row's ids were decoded back to text, every ``<image>`` in it replaced by the
model's image part, and the processor re-tokenized the whole text with the images. After: the ids stay
ids; the processor expands only the image parts (one short text per row with pictures), and the
expansion is spliced where each picture stands. Both run here on the same rows (Bradley-Terry pairs
of the tiny offline Qwen2-VL processor, rmspec.vision.tiny: one 64x64 picture per pair, replies of
--reply-words words), interleaved, and the median of --repeats batches is reported; both outputs are
checked equal first (input_ids, attention_mask, mm_token_type_ids, pixel_values, image_grid_thw).

    HF_HUB_OFFLINE=1 python bench/vision_collate.py [--batch 8] [--reply-words 200] [--repeats 30] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8, help="pairs per batch (2x rows)")
    parser.add_argument("--reply-words", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="write bench/results/vision_collate.md")
    args = parser.parse_args()

    import torch
    from PIL import Image

    from rmspec.vision.collate import VisionEncoder, VisionPairCollator
    from rmspec.vision.images import decode_image
    from rmspec.vision.marks import PICTURE_ID
    from rmspec.vision.processor import image_text
    from rmspec.vision.tiny import build_processor, tiny_config

    torch.set_num_threads(1)
    processor = build_processor()
    config = tiny_config(processor.tokenizer)
    part = image_text(config, processor)
    tok = processor.tokenizer
    folder = Path(tempfile.mkdtemp(prefix="vision_collate_"))
    ids = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    words = " ".join(f"word{k}" for k in range(args.reply_words))
    old_rows, new_rows = [], []
    for k in range(args.batch):
        path = folder / f"{k}.png"
        Image.effect_noise((64, 64), 40 + k).convert("RGB").save(path)
        head, tail = "<|im_start|>user\n", f"Describe picture {k}.<|im_end|>\n<|im_start|>assistant\n"
        chosen, rejected = f"A noisy picture: {words}.<|im_end|>\n", f"Nothing: {words[::-1]}.<|im_end|>\n"
        old_rows.append(
            {
                "chosen_input_ids": ids(head + "<image>" + tail + chosen),
                "rejected_input_ids": ids(head + "<image>" + tail + rejected),
                "images": [str(path)],
                "margin": 0.0,
            }
        )
        new_rows.append(
            {
                "chosen_input_ids": ids(head) + [PICTURE_ID] + ids(tail + chosen),
                "rejected_input_ids": ids(head) + [PICTURE_ID] + ids(tail + rejected),
                "images": [str(path)],
                "margin": 0.0,
            }
        )

    def before(rows):
        """e8e6340's VisionEncoder + VisionPairCollator: decode, replace `<image>`, re-tokenize with the processor."""
        row_ids = [r["chosen_input_ids"] for r in rows] + [r["rejected_input_ids"] for r in rows]
        images = [r["images"] for r in rows] * 2
        texts = [tok.decode(row, skip_special_tokens=False).replace("<image>", part) for row in row_ids]
        nested = [[decode_image(ref) for ref in refs] for refs in images]
        batch = dict(processor(text=texts, images=nested, padding=True, padding_side="right", return_tensors="pt"))
        batch["margin"] = torch.zeros(len(rows))
        return batch

    after = VisionPairCollator(VisionEncoder(processor, part))
    old, new = before(old_rows), after(new_rows)
    for key in ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw"):
        assert torch.equal(old[key], new[key]), key

    times: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.repeats):
        for name, fn, rows in (("before", before, old_rows), ("after", after, new_rows)):
            start = time.perf_counter()
            fn(rows)
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    tokens = int(new["attention_mask"].sum())
    load = os.getloadavg()
    lines = [
        "# The VLM collator's time per batch (issue 47: a picture's place an id, not `<image>` text)",
        "",
        f"Command: `HF_HUB_OFFLINE=1 python bench/vision_collate.py --batch {args.batch} "
        f"--reply-words {args.reply_words} --repeats {args.repeats}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, {platform.python_version()}, torch "
        f"{torch.__version__}, one torch thread; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        "(1 / 5 / 15 min) while it ran: a shared machine, other jobs running, so the absolute times are noisy; "
        "the two are interleaved batch by batch, so they saw the same load.",
        "",
        f"Batch: {args.batch} pairs = {2 * args.batch} rows of the tiny Qwen2-VL processor, one 64x64 picture "
        f"per pair, {tokens} tokens in all ({tokens // (2 * args.batch)} per row). Outputs checked equal first.",
        "",
        "| collator | median ms / batch | min ms | max ms |",
        "|---|---|---|---|",
    ]
    for name in ("before", "after"):
        lines.append(f"| {name} | {med[name]:.1f} | {min(times[name]) * 1000:.1f} | {max(times[name]) * 1000:.1f} |")
    lines += ["", f"after / before: {med['after'] / med['before']:.2f}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (REPO / "bench" / "results" / "vision_collate.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
