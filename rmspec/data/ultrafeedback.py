"""Raw UltraFeedback rows (an instruction and rated `completions`) binarized as data.mapping.binarize says:
best_vs_worst, best_vs_random (seeded by the row's index), all_pairs (every pair of different ratings, the margin
their difference), or ranked (one listwise row, best first)."""

from __future__ import annotations

import math
import random
from typing import Any

from rmspec.data.records import Reject
from rmspec.data.row_values import messages, required


def ultrafeedback_records(row: dict[str, Any], prompt_column: str, binarize: str, index: int) -> list[dict[str, Any]]:
    prompt = messages(required(row, prompt_column), "instruction")
    completions = required(row, "completions")
    if not isinstance(completions, list):
        raise Reject("wrong_type", f"completions must be a list, got {type(completions).__name__}")
    scored = []
    for c in completions:
        if not isinstance(c, dict) or not isinstance(c.get("response"), str) or not c["response"].strip():
            continue
        score = c.get("overall_score", c.get("fine-grained_score"))
        if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
            scored.append((float(score), c["response"]))
    if len(scored) < 2:
        raise Reject("too_few_completions", f"{len(scored)} completion(s) with a response and a score; need 2")
    scored.sort(key=lambda s: -s[0])
    best, worst = scored[0], scored[-1]
    if best[0] == worst[0]:
        raise Reject("tie", f"all completions score {best[0]}")
    if binarize == "ranked":  # listwise: the whole ranking, best first
        return [{"prompt_messages": prompt, "responses": [s[1] for s in scored], "scores": [s[0] for s in scored]}]
    if binarize == "best_vs_worst":
        pairs = [(best, worst)]
    elif binarize == "best_vs_random":
        lower = [s for s in scored[1:] if s[0] < best[0]]
        pairs = [(best, random.Random(index).choice(lower))]
    else:
        pairs = [(a, b) for i, a in enumerate(scored) for b in scored[i + 1 :] if a[0] > b[0]]
    return [
        {
            "prompt_messages": prompt,
            "chosen": a[1],
            "rejected": b[1],
            "margin": a[0] - b[0],
            "score_chosen": a[0],
            "score_rejected": b[0],
        }
        for a, b in pairs
    ]
