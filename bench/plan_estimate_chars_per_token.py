"""Characters per token of the MiniLM tokenizer on the demo preferences (the planner's length guess).

The planner (rmspec/plan/estimate.py) never loads a tokenizer: it guesses a sequence's tokens as
len(prompt) + len(response) characters divided by CHARS_PER_TOKEN. This script measures what that
ratio really is for the packaged all-MiniLM-L6-v2 tokenizer on rmspec/data/demo/preferences.jsonl,
encoding each (prompt, response) as the text pair the data pipeline uses, special tokens included.

    HF_HUB_OFFLINE=1 /tmp/venv/bin/python bench/plan_estimate_chars_per_token.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from transformers import AutoTokenizer

from rmspec.packaged import resolve_model_path
from rmspec.plan.estimate import CHARS_PER_TOKEN, PADDING_ALLOWANCE

REPO = Path(__file__).resolve().parents[1]
MAX_LENGTH = 256


def main() -> None:
    tok = AutoTokenizer.from_pretrained(resolve_model_path("sentence-transformers/all-MiniLM-L6-v2", REPO))
    rows = [json.loads(line) for line in (REPO / "rmspec/data/demo/preferences.jsonl").open() if line.strip()]
    chars, tokens, clipped = [], [], []
    for row in rows:
        for response in (row["chosen"], row["rejected"]):
            n = len(tok(row["prompt"], response)["input_ids"])
            chars.append(len(row["prompt"]) + len(response))
            tokens.append(n)
            clipped.append(min(n, MAX_LENGTH))
    ratio = sum(chars) / sum(tokens)
    sample = chars[: 2 * 500]
    guess = statistics.fmean(min(c / CHARS_PER_TOKEN, MAX_LENGTH) for c in sample)
    print(f"rows {len(rows)}, sequences {len(tokens)} (prompt+chosen and prompt+rejected)")
    print(f"mean characters per sequence {statistics.fmean(chars):.1f}")
    print(
        f"mean tokens per sequence (special tokens included) {statistics.fmean(tokens):.1f}, "
        f"clipped at {MAX_LENGTH}: {statistics.fmean(clipped):.1f}"
    )
    print(f"characters per token: {ratio:.2f}")
    print(
        f"planner guess from the first 500 rows at {CHARS_PER_TOKEN} chars/token: mean {guess:.1f} tokens, "
        f"with {PADDING_ALLOWANCE:.0%} padding allowance {guess * (1 + PADDING_ALLOWANCE):.1f}"
    )


if __name__ == "__main__":
    main()
