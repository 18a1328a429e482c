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


def as_pairs(held: list[dict]) -> list[dict]:
    """Held-out rows (prompt, chosen, rejected) as the pairs rmspec.train.judge_grpo.judge_rows takes."""
    return [
        {
            "id": r["id"],
            "prompt_messages": [{"role": "user", "content": r["prompt"]}],
            "chosen": r["chosen"],
            "rejected": r["rejected"],
        }
        for r in held
    ]


def judge_model(model: Any, tok: Any, held: list[dict], approach: Any, max_new_tokens: int) -> dict[str, float]:
    """held_out_accuracy of a model already loaded (in eval mode; tok with a pad token)."""
    from rmspec.inference.encoding import make_layout
    from rmspec.inference.judge import _prompt_ids, generate
    from rmspec.train.judge_grpo import judge_rows, rule_from_spec
    from rmspec.train.judge_reward import parse

    rows = judge_rows(as_pairs(held), approach, seed=0)
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


def letter_tokens(tok: Any) -> tuple[list[int], int, int]:
    """(the reply's ids before the letter, A's id, B's id): "(A)" and "(B)" tokenized as the trained reply is,
    their common prefix (SmolLM2: "(") and the first id where they differ."""
    a, b = (tok(f"({x})", add_special_tokens=False)["input_ids"] for x in "AB")
    k = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    return list(a[:k]), a[k], b[k]


def letter_probabilities(model: Any, tok: Any, held: list[dict], approach: Any, batch_size: int = 8) -> dict:
    """The judge's probability of each letter at the verdict position, both orders of every held-out pair: one
    forward of prompt + the reply's ids before the letter ("("), no generation. For each prompt,
    P(correct) = P(correct letter) / (P(A) + P(B)). Figures (prefixed p_): the mean P(correct) over all
    prompts, with its standard error over the pairs (a pair's two orders averaged, so the two correlated
    prompts of a pair count once); per order; "both": the share of pairs where the correct letter is the more
    probable in both orders; "pair": where it is on average over the two orders (position bias cancelled);
    "a": the mean P(A) / (P(A) + P(B)) (0.5: no position bias in probability); "letters": the mean
    P(A) + P(B) (the mass on the two letters); "open": the mean probability of the reply's first id ("(")
    at the reply's start (the format). "correct_by_pair": each pair's P(correct) in the first and the
    swapped order."""
    import torch

    from rmspec.train.judge_grpo import judge_rows

    rows = judge_rows(as_pairs(held), approach, seed=0)
    prefix, tok_a, tok_b = letter_tokens(tok)
    prompts = [ids + prefix for ids in _prompt_ids_of(tok, [r["prompt"] for r in rows])]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    p_a, p_b, p_open = [0.0] * len(prompts), [0.0] * len(prompts), [0.0] * len(prompts)
    decoder, head = model.base_model, model.get_output_embeddings()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            width = max(len(prompts[i]) for i in batch)
            ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):  # right padding: the real tokens keep positions 0..n-1
                ids[row, : len(prompts[i])] = torch.tensor(prompts[i])
                mask[row, : len(prompts[i])] = 1
            hidden = decoder(input_ids=ids, attention_mask=mask).last_hidden_state
            ends = torch.tensor([len(prompts[i]) for i in batch])
            rows_ = torch.arange(len(batch))
            verdict = head(hidden[rows_, ends - 1]).float().softmax(-1)  # the letter's position
            opening = head(hidden[rows_, ends - 1 - len(prefix)]).float().softmax(-1)  # the reply's first id
            for row, i in enumerate(batch):
                p_a[i], p_b[i] = verdict[row, tok_a].item(), verdict[row, tok_b].item()
                p_open[i] = opening[row, prefix[0]].item() if prefix else 1.0
    correct = [(pa if r["gold"] == "A" else pb) / (pa + pb) for pa, pb, r in zip(p_a, p_b, rows)]
    first, swapped = correct[::2], correct[1::2]  # judge_rows: the two orders of a pair adjacent
    pair_means = [(x + y) / 2 for x, y in zip(first, swapped)]
    n = len(pair_means)
    return {
        "p_correct": statistics.mean(correct),
        "p_correct_se": statistics.stdev(pair_means) / n**0.5,
        "p_correct_first": statistics.mean(first),
        "p_correct_swapped": statistics.mean(swapped),
        "p_both": sum(x > 0.5 and y > 0.5 for x, y in zip(first, swapped)) / n,
        "p_pair": sum(m > 0.5 for m in pair_means) / n,
        "p_a": statistics.mean(pa / (pa + pb) for pa, pb in zip(p_a, p_b)),
        "p_letters": statistics.mean(pa + pb for pa, pb in zip(p_a, p_b)),
        "p_open": statistics.mean(p_open),
        # each pair's P(correct) in the first and the swapped order, for other figures later
        "p_correct_by_pair": {r["pair"]: [round(x, 4), round(y, 4)] for r, x, y in zip(rows[::2], first, swapped)},
    }


def _prompt_ids_of(tok: Any, texts: list[str]) -> list[list[int]]:
    """The judge prompts' ids as greedy judging renders them (rmspec's prompt layout, generation prompt)."""
    from rmspec.inference.encoding import make_layout
    from rmspec.inference.judge import _prompt_ids

    return _prompt_ids(make_layout(tok), tok, texts)
