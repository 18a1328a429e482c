"""Reward-model diagnostics from per-example scores: no model, no torch.

All functions read the per-example rows written to RUN/eval/*.jsonl (or plain lists), so the
report can recompute every figure from the files.

- accuracy by subset and by length bucket;
- calibration of P(chosen) = sigmoid(margin): reliability table and expected calibration error;
- length bias: correlation of reward with response length, accuracy when the chosen response
  is the longer vs the shorter one;
- reward distributions (chosen, rejected, pooled) and the mean/std saved into the model config;
- for a generative judge, verdict consistency when the two responses swap places.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rmspec.evaluate import registry
from rmspec.evaluate.figures import Pair


def pairs_from_rows(kind: str, rows: Iterable[Mapping[str, Any]]) -> list[Pair]:
    """Chosen-vs-rejected pairs from any benchmark's rows, as the kind defines them (its `pairs`:
    RewardBench 2 the first correct completion against each incorrect one, RM-Bench the
    same-style pairs, so lengths compare like with like)."""
    return registry.get(kind).pairs(list(rows))


def accuracy_by_subset(pairs: Sequence[Pair]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        groups[p.subset].append(p)
    return {s: {"accuracy": float(np.mean([p.correct for p in g])), "count": len(g)} for s, g in sorted(groups.items())}


def _sized(pairs: Sequence[Pair]) -> list[tuple[Pair, int, int]]:
    """(pair, len_chosen, len_rejected) for the pairs whose two lengths are known."""
    return [(p, p.len_chosen, p.len_rejected) for p in pairs if p.len_chosen is not None and p.len_rejected is not None]


def accuracy_by_length(pairs: Sequence[Pair], buckets: int = 4) -> list[dict[str, float]]:
    """Accuracy per quantile bucket of the pair's mean response length (characters)."""
    sized = _sized(pairs)
    usable = [p for p, _, _ in sized]
    if not usable:
        return []
    lengths = np.array([(c + r) / 2 for _, c, r in sized])
    edges = np.unique(np.quantile(lengths, np.linspace(0, 1, buckets + 1)))
    if len(edges) < 2:
        edges = np.array([lengths.min(), lengths.max()])
    index = np.clip(np.searchsorted(edges, lengths, side="right") - 1, 0, len(edges) - 2)
    out = []
    for b in range(len(edges) - 1):
        members = [p for p, i in zip(usable, index) if i == b]
        if members:
            out.append(
                {
                    "lo": float(edges[b]),
                    "hi": float(edges[b + 1]),
                    "count": len(members),
                    "accuracy": float(np.mean([p.correct for p in members])),
                }
            )
    return out


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # stable for large |x|


def calibration(margins: Sequence[float], bins: int = 10) -> dict[str, Any]:
    """Reliability of P(chosen) = sigmoid(margin).

    Each pair's prediction is the side with p > 1/2, its confidence max(p, 1 - p) in [0.5, 1];
    a pair is right when margin > 0 (a tie is wrong, at confidence 0.5). Equal-width bins over
    [0.5, 1]; ECE = sum over bins of (n_bin / n) * |accuracy - mean confidence|.
    """
    m = np.asarray(margins, dtype=float)
    if m.size == 0:
        return {"bins": [], "ece": None, "n": 0}
    p = sigmoid(m)
    confidence = np.maximum(p, 1 - p)
    correct = (m > 0).astype(float)
    edges = np.linspace(0.5, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, bins - 1)
    table, ece = [], 0.0
    for b in range(bins):
        mask = index == b
        n = int(mask.sum())
        if n == 0:
            table.append(
                {"lo": float(edges[b]), "hi": float(edges[b + 1]), "count": 0, "confidence": None, "accuracy": None}
            )
            continue
        conf, acc = float(confidence[mask].mean()), float(correct[mask].mean())
        ece += n / m.size * abs(acc - conf)
        table.append(
            {"lo": float(edges[b]), "hi": float(edges[b + 1]), "count": n, "confidence": conf, "accuracy": acc}
        )
    return {"bins": table, "ece": float(ece), "n": int(m.size)}


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if x.size < 2 or np.std(x) == 0 or np.std(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    # Average ranks for ties, so Spearman matches its textbook definition.
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size, dtype=float)
    for value in np.unique(x):
        tied = x == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def length_bias(pairs: Sequence[Pair]) -> dict[str, Any]:
    """Correlation of reward with response length (chosen and rejected pooled) and accuracy by which side is longer."""
    sized = _sized(pairs)
    usable = [p for p, _, _ in sized]
    if not usable:
        return {}
    rewards = np.array([v for p in usable for v in (p.chosen, p.rejected)])
    lengths = np.array([v for _, c, r in sized for v in (c, r)], dtype=float)
    longer = [p for p, c, r in sized if c > r]
    shorter = [p for p, c, r in sized if c < r]

    def acc(group: list[Pair]) -> float | None:
        return float(np.mean([p.correct for p in group])) if group else None

    return {
        "pearson": _pearson(lengths, rewards),
        "spearman": _pearson(_ranks(lengths), _ranks(rewards)),
        "accuracy_chosen_longer": acc(longer),
        "n_chosen_longer": len(longer),
        "accuracy_chosen_shorter": acc(shorter),
        "n_chosen_shorter": len(shorter),
        "n_same_length": len(usable) - len(longer) - len(shorter),
        # The accuracy a "longer wins" rule would get on these pairs: how much length alone explains.
        "length_heuristic_accuracy": float(len(longer) / len(usable)),
    }


def _stats(values: np.ndarray) -> dict[str, float | None]:
    if values.size == 0:
        return {"mean": None, "std": None, "min": None, "max": None}
    return {
        "mean": float(values.mean()),
        "std": float(values.std()),
        "min": float(values.min()),
        "max": float(values.max()),
    }


def reward_distribution(chosen: Sequence[float], rejected: Sequence[float]) -> dict[str, Any]:
    c, r = np.asarray(chosen, dtype=float), np.asarray(rejected, dtype=float)
    return {
        "chosen": _stats(c),
        "rejected": _stats(r),
        "all": _stats(np.concatenate([c, r])),
        "margin": _stats(c - r) if c.size == r.size else None,
    }


def reward_normalization(chosen: Sequence[float], rejected: Sequence[float]) -> dict[str, float]:
    """Mean and (population) std of all rewards, for downstream (r - mean) / std."""
    values = np.concatenate([np.asarray(chosen, dtype=float), np.asarray(rejected, dtype=float)])
    if values.size == 0:
        raise ValueError("no rewards to normalize")
    return {"mean": float(values.mean()), "std": float(values.std())}


def save_reward_stats(model_dir: str | Path, stats: Mapping[str, float], source: str = "validation") -> dict[str, Any]:
    """Write reward_mean / reward_std (and where they came from) into model_dir/config.json, atomically.

    transformers keeps unknown config keys as attributes, so `AutoConfig.from_pretrained(d).reward_mean`
    reads them back.
    """
    from rmspec.rundir import atomic_write_json

    path = Path(model_dir) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    config = json.loads(path.read_text(encoding="utf-8"))
    config["reward_mean"] = float(stats["mean"])
    config["reward_std"] = float(stats["std"])
    config["reward_stats_source"] = source
    atomic_write_json(path, config)
    return config


def pair_diagnostics(kind: str, rows: Sequence[Mapping[str, Any]], calibration_bins: int = 10) -> dict[str, Any]:
    """Every diagnostic of a reward model's rows on one benchmark (or the validation split), as a
    JSON-ready dict. A judge's rows: verdict_diagnostics; a process model's: its kind's
    step_diagnostics (rmspec.evaluate.row_readers says which rows are which)."""
    if not rows:
        return {}
    kind_obj = registry.get(kind)
    pairs = kind_obj.pairs(rows)
    if not pairs:
        return {}
    chosen = [p.chosen for p in pairs]
    rejected = [p.rejected for p in pairs]
    out = {
        "num_pairs": len(pairs),
        "pair_accuracy": float(np.mean([p.correct for p in pairs])),
        "accuracy_by_subset": accuracy_by_subset(pairs),
        "accuracy_by_length": accuracy_by_length(pairs),
        "calibration": calibration([p.margin for p in pairs], calibration_bins),
        "length_bias": length_bias(pairs),
        "rewards": reward_distribution(chosen, rejected),
    }
    column = kind_obj.source_column  # JudgeBench: subsets are categories, sources are finer
    if column and all(column in r for r in rows):
        by_source = [Pair(str(r[column]), p.chosen, p.rejected) for r, p in zip(rows, pairs)]
        out["accuracy_by_source"] = accuracy_by_subset(by_source)
    return out


# ----------------------------------------------------------------- generative judge


def verdict_diagnostics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A judge's rows on one benchmark: no scores, verdicts in two orders."""
    if not rows:
        return {}
    letters = [{"A>B": "A", "B>A": "B"}.get(r["label"]) for r in rows]
    return {
        "verdicts": verdict_consistency(
            [r.get("verdict") for r in rows], [r.get("verdict_swapped") for r in rows], letters
        )
    }


def verdict_consistency(
    verdicts: Sequence[str | None], verdicts_swapped: Sequence[str | None], labels: Sequence[str | None] | None = None
) -> dict[str, Any]:
    """Does the judge pick the same response when the two swap places?

    verdicts: "A"/"B" (or None when unparsed) on (first, second); verdicts_swapped: on (second, first).
    Consistent when the swapped verdict names the other letter. Position bias: the share of "A"
    over all parsed verdicts (0.5 is unbiased). With labels ("A" = the first response is better),
    also the accuracy of each game and the JudgeBench two-game outcome shares.
    """
    if len(verdicts) != len(verdicts_swapped):
        raise ValueError("verdicts and verdicts_swapped differ in length")
    flip: dict[str | None, str] = {"A": "B", "B": "A"}  # .get(None): an unparsed verdict or label
    n = len(verdicts)
    both = [(v, s) for v, s in zip(verdicts, verdicts_swapped) if v in flip and s in flip]
    parsed = [v for v in (*verdicts, *verdicts_swapped) if v in flip]
    out: dict[str, Any] = {
        "n": n,
        "n_unparsed": sum(v not in flip for v in (*verdicts, *verdicts_swapped)),
        "consistency": (sum(flip[v] == s for v, s in both) / len(both)) if both else None,
        "position_bias_A": (sum(v == "A" for v in parsed) / len(parsed)) if parsed else None,
    }
    if labels is not None:
        if len(labels) != n:
            raise ValueError("labels and verdicts differ in length")
        first = [v == lab for v, lab in zip(verdicts, labels)]
        second = [s == flip.get(lab) for s, lab in zip(verdicts_swapped, labels)]
        outcomes = [
            a - (v in flip and not a) + b - (s in flip and not b)
            for a, b, v, s in zip(first, second, verdicts, verdicts_swapped)
        ]
        out["accuracy_first_order"] = sum(first) / n if n else None
        out["accuracy_swapped_order"] = sum(second) / n if n else None
        out["double_game"] = {
            "correct": sum(o > 0 for o in outcomes) / n if n else None,
            "incorrect": sum(o < 0 for o in outcomes) / n if n else None,
            "tie": sum(o == 0 for o in outcomes) / n if n else None,
        }
    return out
