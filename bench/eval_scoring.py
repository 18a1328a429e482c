"""Benchmark: scoring throughput, two cases.

``--case order`` (default): length-sorted batches vs batches in file order. Scores the demo
benchmark (rmspec/data/demo/benchmark_pairs.jsonl, 400 pairs = 800 sequences) with the packaged
all-MiniLM-L6-v2 checkpoint on CPU, both ways, and reports wall time, padding share (padded
positions / all positions) and the largest score difference between the two orders (should be
~0: a text's score does not depend on its batch).

``--case best_of_n``: RewardBench-2-shaped data (N completions per prompt) on a tiny random-init
Qwen2 decoder with a byte-level BPE tokenizer and a ChatML template, built here: each prompt
computed once per group (RewardEngine.score_groups, shared-prefix rows) vs today's path for
encoders (RewardEngine.rewards: every (prompt, completion) sequence on its own, length-sorted
batches). Reports wall time (best of --repeats, alternating), tokens computed and the largest
score difference; writes bench/results/eval_scoring_best_of_n.md with --write.

    HF_HUB_OFFLINE=1 python bench/eval_scoring.py [--batch-size 32] [--limit 400]
    HF_HUB_OFFLINE=1 python bench/eval_scoring.py --case best_of_n [--prompts 64] [--n 4] [--write]
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


WORDS = [f"{a}{b}" for a in "bcdfghjklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "ou", "ee")]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_decoder(seed: int = 0):
    """A random-init Qwen2 reward model (score head) and a byte-level BPE tokenizer with ChatML."""
    import random

    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForSequenceClassification

    rng = random.Random(seed)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        [" ".join(rng.choice(WORDS) for _ in range(50)) for _ in range(1000)],
        vocab_size=1000,
        min_frequency=2,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        model_max_length=1024,
    )
    tok.chat_template = CHATML
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        num_labels=1,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    return Qwen2ForSequenceClassification(config).eval(), tok


def best_of_n_data(prompts: int, n: int, seed: int = 0):
    """RewardBench-2-shaped groups: a (mostly multi-turn) prompt and n completions of mixed length."""
    import random

    rng = random.Random(seed)
    say = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    groups = []
    for _ in range(prompts):
        turns = [
            {"role": "user" if t % 2 == 0 else "assistant", "content": say(rng.randint(20, 40))}
            for t in range(rng.choice([1, 3, 5]))
        ]
        groups.append((turns, [say(rng.randint(10, 60)) for _ in range(n)]))
    return groups


def best_of_n(args) -> None:
    import os
    import platform

    import torch
    import transformers

    from rmspec.inference.engine import RewardEngine
    from rmspec.inference.prefix_mask import split_shared_prefix
    from rmspec.inference.shared_prefix import can_share_prompt

    torch.set_num_threads(2)
    model, tok = tiny_decoder()
    engine = RewardEngine.from_parts(model, tok, batch_size=args.batch_size)
    assert engine.prompt_once and can_share_prompt(model)
    groups = best_of_n_data(args.prompts, args.n)
    items = [(p, r) for p, rs in groups for r in rs]
    encoded = engine.encode(items)
    separate_tokens = sum(len(e.ids) for e in encoded)
    shared_tokens, prefix_tokens, cursor = 0, 0, 0
    for _, rs in groups:
        group = split_shared_prefix([e.ids for e in encoded[cursor : cursor + len(rs)]])
        shared_tokens += len(group)
        prefix_tokens += len(group.prefix) * len(rs)
        cursor += len(rs)
    prompt_share_rest = 1 - prefix_tokens / separate_tokens
    engine.rewards(items[:8]), engine.score_groups(groups[:2])  # warm-up (first-call set-up is not scoring)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {"separate": [], "prompt_once": []}
    for _ in range(args.repeats):  # alternate, so load changes hit both paths alike
        start = time.perf_counter()
        separate = engine.rewards(items)
        times["separate"].append(time.perf_counter() - start)
        start = time.perf_counter()
        once = [s for g in engine.score_groups(groups) for s in g]
        times["prompt_once"].append(time.perf_counter() - start)
    load_after = os.getloadavg()
    diff = max(abs(a - b) for a, b in zip(separate, once))
    best = {k: min(v) for k, v in times.items()}
    report = {
        "prompts": len(groups),
        "n": args.n,
        "sequences": len(items),
        "batch_size": args.batch_size,
        "parameters": sum(p.numel() for p in model.parameters()),
        "tokens_separate": separate_tokens,
        "tokens_prompt_once": shared_tokens,
        "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "speedup_best": round(best["separate"] / best["prompt_once"], 2),
        "max_abs_score_difference": diff,
        "load_before": load_before,
        "load_after": load_after,
    }
    print(json.dumps(report, indent=2))
    if not args.write:
        return
    command = (
        f"HF_HUB_OFFLINE=1 .venv/bin/python bench/eval_scoring.py --case best_of_n --prompts {args.prompts} "
        f"--n {args.n} --batch-size {args.batch_size} --repeats {args.repeats} --write"
    )
    lines = [
        "# Best-of-N scoring (RewardBench 2 shape): prompt once vs each sequence on its own",
        "",
        f"Command: `{command}`  ",
        f"Machine: 2 shared CPU cores ({platform.machine()}), other engineers' jobs running: load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after; torch {torch.__version__} (2 threads), "
        f"transformers {transformers.__version__}; fp32, SDPA.  ",
        f"Model: random-init Qwen2 reward model, {report['parameters'] / 1e6:.1f}M parameters (hidden 256, 4 layers, "
        "GQA 4/2), byte-level BPE with a ChatML template, built by the bench.  ",
        f"Data: {len(groups)} prompts (1, 3 or 5 turns) x {args.n} completions = {len(items)} sequences, generated "
        f"by the bench; the prompt (chat template included) is {1 - prompt_share_rest:.0%} of each sequence's tokens "
        f"on average; batches of about {args.batch_size} sequences; one untimed warm-up call of each path.",
        "",
        "| path | tokens computed | seconds (each repeat) | best | sequences/s (best) |",
        "|---|---|---|---|---|",
        f"| each sequence on its own (RewardEngine.rewards) | {separate_tokens} | "
        f"{', '.join(f'{x:.2f}' for x in times['separate'])} | {best['separate']:.2f} | "
        f"{len(items) / best['separate']:.1f} |",
        f"| prompt once (RewardEngine.score_groups) | {shared_tokens} | "
        f"{', '.join(f'{x:.2f}' for x in times['prompt_once'])} | {best['prompt_once']:.2f} | "
        f"{len(items) / best['prompt_once']:.1f} |",
        "",
        f"Prompt once: {shared_tokens / separate_tokens:.0%} of the tokens, {report['speedup_best']:.2f}x faster "
        f"(best of {args.repeats}, run alternately). Largest score difference: {diff:.2e} "
        "(tests/test_packing_scoring.py holds it under 1e-5).",
        "Token counts are real tokens; the packed path also computes padding up to the longest row of a batch, "
        "and its attention is a dense 4D mask (SDPA cannot skip the masked blocks on CPU).",
    ]
    out = REPO / "bench" / "results" / "eval_scoring_best_of_n.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["order", "best_of_n"], default="order")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--prompts", type=int, default=64, help="best_of_n: prompts (groups)")
    parser.add_argument("--n", type=int, default=4, help="best_of_n: completions per prompt (RewardBench 2: 4)")
    parser.add_argument("--repeats", type=int, default=3, help="best_of_n: timed repeats of each path")
    parser.add_argument("--write", action="store_true", help="best_of_n: write bench/results/eval_scoring_best_of_n.md")
    args = parser.parse_args()
    if args.case == "best_of_n":
        best_of_n(args)
        return

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
        "file_order": {
            "seconds": round(t_order, 2),
            "seq_per_s": round(len(sequences) / t_order, 1),
            "padding_share": round(padding_share(sequences, natural, args.batch_size), 3),
        },
        "length_sorted": {
            "seconds": round(t_sorted, 2),
            "seq_per_s": round(len(sequences) / t_sorted, 1),
            "padding_share": round(padding_share(sequences, by_length, args.batch_size), 3),
        },
        "max_abs_score_difference": max(abs(a - b) for a, b in zip(in_order, sorted_scores)),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
