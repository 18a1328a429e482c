"""Benchmark: scoring throughput with length-sorted batches vs batches in file order.

Scores the demo benchmark (rmspec/data/demo/benchmark_pairs.jsonl, 400 pairs = 800 sequences)
with the packaged all-MiniLM-L6-v2 checkpoint on CPU, both ways, and reports wall time, padding
share (padded positions / all positions) and the largest score difference between the two
orders (should be ~0: a text's score does not depend on its batch).

    HF_HUB_OFFLINE=1 python bench/eval_scoring.py [--batch-size 32] [--limit 400]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def padding_share(sequences, order, batch_size):
    padded = total = 0
    for start in range(0, len(order), batch_size):
        lengths = [len(sequences[i]) for i in order[start : start + batch_size]]
        padded += max(lengths) * len(lengths)
        total += sum(lengths)
    return 1 - total / padded


def score_in_order(model, sequences, pad_id, batch_size):
    """The naive baseline: batches in input order (what a plain DataLoader does)."""
    import torch

    scores = []
    with torch.inference_mode():
        for start in range(0, len(sequences), batch_size):
            batch = sequences[start : start + batch_size]
            width = max(map(len, batch))
            ids = torch.full((len(batch), width), pad_id)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, seq in enumerate(batch):
                ids[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = 1
            scores += model(input_ids=ids, attention_mask=mask).logits[:, 0].tolist()
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=400)
    args = parser.parse_args()

    import torch

    from rmspec.evaluate.benchmarks import load_benchmark
    from rmspec.inference.encoding import encode
    from rmspec.inference.loading import load_reward_model, max_length_for
    from rmspec.inference.scoring import score_token_ids
    from rmspec.packaged import resolve_model_path

    torch.manual_seed(0)
    model, tokenizer = load_reward_model(resolve_model_path("sentence-transformers/all-MiniLM-L6-v2"))
    data = load_benchmark("pairs", str(REPO / "rmspec/data/demo/benchmark_pairs.jsonl"), limit=args.limit)
    limit = max_length_for(model, tokenizer)
    sequences = [encode(tokenizer, ex.prompt, r, limit).ids for ex in data.examples for r in ex.responses]
    natural = list(range(len(sequences)))
    by_length = sorted(natural, key=lambda i: len(sequences[i]))

    start = time.perf_counter()
    in_order = score_in_order(model, sequences, tokenizer.pad_token_id, args.batch_size)
    t_order = time.perf_counter() - start
    start = time.perf_counter()
    sorted_scores = score_token_ids(model, sequences, tokenizer.pad_token_id, args.batch_size)
    t_sorted = time.perf_counter() - start

    report = {
        "sequences": len(sequences),
        "batch_size": args.batch_size,
        "threads": torch.get_num_threads(),
        "file_order": {"seconds": round(t_order, 2), "seq_per_s": round(len(sequences) / t_order, 1),
                       "padding_share": round(padding_share(sequences, natural, args.batch_size), 3)},
        "length_sorted": {"seconds": round(t_sorted, 2), "seq_per_s": round(len(sequences) / t_sorted, 1),
                          "padding_share": round(padding_share(sequences, by_length, args.batch_size), 3)},
        "max_abs_score_difference": max(abs(a - b) for a, b in zip(in_order, sorted_scores)),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
