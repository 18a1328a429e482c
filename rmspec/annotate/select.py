"""Pick the pairs worth labelling, scored by a model through rmspec.inference (the one engine).

- `uncertain`: the smallest |reward(first) - reward(second)|: where the model cannot tell; for an
  ensemble (approach.ensemble), the largest std of its members' margins relative to |mean margin|;
- `disagree`: labelled pairs the model contradicts most confidently (reward(rejected) far above
  reward(chosen)): likely label noise, worth a second look;
- `random`: a seeded sample, the baseline.

`--stratify FIELD` splits N across the values of FIELD (`group`: the spec's mapped group; for a
file of rows, any of its columns, e.g. `subset`) in proportion to their sizes (largest
remainders) and picks within each. Every choice is written with its scores (`selection.jsonl`),
so it can be audited.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmspec.errors import RmspecError

if TYPE_CHECKING:
    from rmspec.inference.engine import RewardEngine

CRITERIA = ("uncertain", "disagree", "random")


def load_engine(model: str | Path) -> RewardEngine:
    """A run directory, a model folder, or a packaged model name (e.g. the quickstart MiniLM)."""
    from rmspec.inference import scorers
    from rmspec.inference.engine import load_scorer
    from rmspec.packaged import resolve_model_path

    path = model if Path(model).exists() else resolve_model_path(str(model))
    if not Path(path).exists():
        raise RmspecError(
            f"--model {model}: no such run directory or model folder",
            "give runs/NAME (after rmspec run) or a folder with config.json and weights",
        )
    engine = load_scorer(path)
    if not scorers.of(engine).ranks_pairs:  # a judge, a process model, a composite: no reward margin
        raise RmspecError(
            f"--model {model} is not a score-head reward model",
            "active selection ranks pairs by reward margin: use a bradley_terry or pointwise run",
        )
    return engine


def margins(engine: RewardEngine, items: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(reward of first, reward of second) per pairwise item."""
    first, second = engine.score_pairs(
        [it["prompt"] for it in items], [it["first"] for it in items], [it["second"] for it in items]
    )
    return list(zip(first, second))


def scored_pairs(
    engine: RewardEngine, items: list[dict[str, Any]]
) -> tuple[list[tuple[float, float]], list[float] | None]:
    """(rewards of first and second, the ensemble's disagreement or None) per pairwise item, in one pass.

    Disagreement is the members' std of the margin reward(first) - reward(second): how much the
    ensemble's members differ on which response is better (None for a model without members)."""
    from rmspec.inference.ensemble import ensemble_head, pair_members

    if ensemble_head(engine.model) is None:
        return margins(engine, items), None
    first, second = pair_members(
        engine, [it["prompt"] for it in items], [it["first"] for it in items], [it["second"] for it in items]
    )
    scores, spread = [], []
    for a, b in zip(first, second):
        diffs = [x - y for x, y in zip(a, b)]
        mean = sum(diffs) / len(diffs)
        scores.append((sum(a) / len(a), sum(b) / len(b)))
        spread.append(math.sqrt(sum((d - mean) ** 2 for d in diffs) / len(diffs)))
    return scores, spread


def stratum(item: dict[str, Any], field: str) -> str:
    fields = item.get("fields") or {}
    if field in fields:
        return str(fields[field])
    if field == "group":
        return str(item.get("group", ""))
    raise RmspecError(
        f"--stratify {field}: row {item['id']!r} has no column {field!r}",
        f"name a column every row has (columns: {', '.join(fields) or 'none'}), or use --stratify group",
    )


def quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    """n split across groups in proportion to their sizes (largest remainder), never above a size."""
    total = sum(sizes.values())
    n = min(n, total)
    exact = {g: n * s / total for g, s in sizes.items()}
    out = {g: min(sizes[g], math.floor(v)) for g, v in exact.items()}
    for g in sorted(sizes, key=lambda g: (-(exact[g] - math.floor(exact[g])), g)):
        if sum(out.values()) >= n:
            break
        if out[g] < sizes[g]:
            out[g] += 1
    return out


def select(
    items: list[dict[str, Any]],
    criterion: str,
    n: int,
    *,
    scores: list[tuple[float, float]] | None = None,
    stratify: str | None = None,
    seed: int = 0,
    uncertainty: list[float] | None = None,
) -> list[dict[str, Any]]:
    """The chosen items' audit records: id, group, scores, margin, rank, criterion (best first).

    `uncertainty` (an ensemble's members' std of the margin, scored_pairs): `uncertain` picks the
    largest std / |mean margin| first (how close the members' spread brings the pair to a tie), in
    place of the smallest |margin|. The raw std ranks the other way round (measured in
    bench/results/recipes_ensemble.md: members spread more where margins are large)."""
    if criterion not in CRITERIA:
        raise RmspecError(f"unknown selection {criterion!r}", f"choose one of {', '.join(CRITERIA)}")
    if criterion != "random" and scores is None:
        raise RmspecError(
            f"--select {criterion} needs --model", "give the run or model whose uncertainty guides the choice"
        )
    records = []
    for i, item in enumerate(items):
        rec: dict[str, Any] = {"index": i, "id": item["id"], "group": item.get("group", "")}
        if stratify:
            rec["stratum"] = stratum(item, stratify)
        if scores is not None:
            a, b = scores[i]
            rec.update(score_first=round(a, 6), score_second=round(b, 6), margin=round(a - b, 6))
        if uncertainty is not None:
            rec["ensemble_std"] = round(uncertainty[i], 6)
        records.append(rec)
    if criterion == "disagree":
        unlabelled = [r for r in records if items[r["index"]].get("label") != "first"]
        if unlabelled:
            raise RmspecError(
                f"--select disagree needs labelled pairs; {len(unlabelled)} row(s) have no chosen/rejected",
                "use --select uncertain for unlabelled pairs",
            )
        records = [r for r in records if r["margin"] < 0]  # the model prefers the rejected response
    key: Callable[[dict[str, Any]], tuple[Any, Any]] | None
    key = {"uncertain": lambda r: (abs(r["margin"]), r["index"]), "disagree": lambda r: (r["margin"], r["index"])}.get(
        criterion
    )
    if criterion == "uncertain" and uncertainty is not None:
        key = lambda r: (-r["ensemble_std"] / (abs(r["margin"]) + 1e-9), r["index"])  # noqa: E731
    rng = random.Random(seed)
    if criterion == "random":
        rng.shuffle(records)
        ordered = records
    else:
        assert key is not None  # uncertain or disagree: both have a key
        ordered = sorted(records, key=key)
    if stratify:
        by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in ordered:
            by_group[r["stratum"]].append(r)
        take = quotas({g: len(v) for g, v in by_group.items()}, n)
        chosen = [r for g, v in by_group.items() for r in v[: take[g]]]
        position = {r["index"]: k for k, r in enumerate(ordered)}
        chosen.sort(key=lambda r: position[r["index"]])
    else:
        chosen = ordered[:n]
    for rank, r in enumerate(chosen, 1):
        r.update(rank=rank, criterion=criterion)
    return chosen
