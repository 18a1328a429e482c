"""What bench/judge_grpo.py and bench/judge_smollm2.py share (not a benchmark itself): writing rows, one
`rmspec run` of a spec, the held-out verdict accuracy of a judge in both orders, and mean ± standard error.

Held-out accuracy is judged greedily in both orders with the code the trainer uses at the end
(rmspec.train.judge_grpo: judge rows, the inference path's prompt layout); "both" counts a pair right only
when it is right in both orders (JudgeBench's rule), "mean" is the average of the two orders.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(spec_text: str, folder: Path, name: str) -> float:
    """`rmspec run` of the spec written to folder/NAME.yaml; its wall time in seconds, or exit with its output."""
    spec = folder / f"{name}.yaml"
    spec.write_text(spec_text)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", str(spec)],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"},
    )
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def held_out_accuracy(model_dir: Path, held: list[dict], approach: Any, max_new_tokens: int) -> dict[str, float]:
    """The judge in model_dir on the held-out pairs, both orders, with the approach's template and rule."""
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    tok.pad_token = tok.pad_token or tok.eos_token
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    return judge_model(model, tok, held, approach, max_new_tokens)


def judge_model(model: Any, tok: Any, held: list[dict], approach: Any, max_new_tokens: int) -> dict[str, float]:
    """held_out_accuracy of a model already loaded (in eval mode; tok with a pad token)."""
    from rmspec.inference.encoding import make_layout
    from rmspec.inference.judge import _prompt_ids, generate
    from rmspec.train.judge_grpo import judge_rows, rule_from_spec
    from rmspec.train.judge_reward import parse

    pairs_ = [
        {
            "id": r["id"],
            "prompt_messages": [{"role": "user", "content": r["prompt"]}],
            "chosen": r["chosen"],
            "rejected": r["rejected"],
        }
        for r in held
    ]
    rows = judge_rows(pairs_, approach, seed=0)
    texts = generate(model, tok, _prompt_ids(make_layout(tok), tok, [r["prompt"] for r in rows]), max_new_tokens)
    rule = rule_from_spec(approach)
    right = [parse(t, rule) == r["gold"] for t, r in zip(texts, rows)]
    first, swapped = right[::2], right[1::2]
    return {
        "first": sum(first) / len(first),
        "swapped": sum(swapped) / len(swapped),
        "mean": (sum(first) + sum(swapped)) / len(right),
        "both": sum(a and b for a, b in zip(first, swapped)) / len(first),
        "unparsed": sum(parse(t, rule) is None for t in texts) / len(texts),
        "letter_a": letter_share(texts, rule, rows),
    }


def letter_share(texts: list[str], rule: Any, rows: list[dict]) -> float:
    """The share of parsed verdicts that name the first position (0.5: no position bias); nan if none parsed."""
    from rmspec.train.judge_reward import FIRST, parse

    verdicts = [parse(t, rule) for t in texts]
    parsed = [(v, r) for v, r in zip(verdicts, rows) if v is not None]
    if not parsed:
        return float("nan")
    # The first position's letter: the gold verdict of a row shown in the original order (chosen first).
    first = next(r["gold"] for r in rows if r["order"] == FIRST)
    return sum(v == first for v, _ in parsed) / len(parsed)


def mean_se(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values) / len(values) ** 0.5:.3f}"
