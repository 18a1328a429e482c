"""Is the demo data learnable by the quickstart's model? A minimal Bradley-Terry loop, independent
of rmspec's trainer (so a trainer bug cannot hide a data problem, or the reverse).

    python bench/data_learnability.py [--out bench/results/data_learnability.md]

all-MiniLM-L6-v2 (packaged, offline), one epoch over the training side of a 90/10 split grouped
by prompt, batch 16 pairs, AdamW lr 1e-4, linear schedule with 5% warmup, max 256 tokens, prompt and
response as a text pair; then accuracy on the held-out 10% and on benchmark_pairs.jsonl, per family.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "data_learnability.md"))
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    from rmspec.packaged import resolve_model_path

    torch.manual_seed(42)
    path = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    demo = REPO / "rmspec" / "data" / "demo"
    rows = [json.loads(line) for line in (demo / "preferences.jsonl").read_text().splitlines()]
    bench = [json.loads(line) for line in (demo / "benchmark_pairs.jsonl").read_text().splitlines()]
    prompts = sorted({r["prompt"] for r in rows})
    random.Random(0).shuffle(prompts)
    held = set(prompts[: len(prompts) // 10])
    train = [r for r in rows if r["prompt"] not in held]
    val = [r for r in rows if r["prompt"] in held]
    random.Random(1).shuffle(train)

    def enc(ps, rs):
        return tok(ps, rs, truncation="only_first", max_length=256, padding=True, return_tensors="pt")

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = len(train) // 16
    sched = get_linear_schedule_with_warmup(opt, int(0.05 * steps), steps)
    model.train()
    t0 = time.time()
    for s in range(steps):
        b = train[s * 16 : (s + 1) * 16]
        x = enc([r["prompt"] for r in b] * 2, [r["chosen"] for r in b] + [r["rejected"] for r in b])
        out = model(**x).logits.squeeze(-1)
        loss = -F.logsigmoid(out[:16] - out[16:]).mean()
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    train_s = time.time() - t0
    model.eval()

    def accuracy(rs, key):
        per = defaultdict(list)
        with torch.no_grad():
            for i in range(0, len(rs), 64):
                b = rs[i : i + 64]
                x = enc([r["prompt"] for r in b] * 2, [r["chosen"] for r in b] + [r["rejected"] for r in b])
                o = model(**x).logits.squeeze(-1)
                for r, c, j in zip(b, o[: len(b)], o[len(b) :]):
                    per[r[key]].append(float(c > j))
                    per["ALL"].append(float(c > j))
        return {k: sum(v) / len(v) for k, v in sorted(per.items())}

    val_acc, bench_acc = accuracy(val, "family"), accuracy(bench, "subset")
    lines = [
        "# Demo data learnability (independent minimal Bradley-Terry loop)",
        "",
        "Command: `python bench/data_learnability.py`",
        "",
        f"- {len(train)} training pairs, {steps} steps of 16, {train_s:.0f} s of training on this CPU",
        "",
        "| family | held-out 10% | benchmark_pairs |",
        "|---|---|---|",
    ]
    for k in val_acc:
        lines.append(f"| {k} | {val_acc[k]:.3f} | {bench_acc.get(k, float('nan')):.3f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
