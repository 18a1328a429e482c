"""`data.augment`: extra training pairs made from the training side only (after the split), each
marked `augmented: true` and given an id that says how it was made.

- cross_prompt_negatives: a row's chosen response against another prompt's chosen response;
- truncated_negatives: a row's chosen response against the first `keep` share of its words;
- pairs_from_scores: for pairs that carry score_chosen/score_rejected (columns.score_chosen/score_rejected), new
  pairs between responses of the same prompt whose scores differ by at least `min_gap`.
"""

from __future__ import annotations

import random
from typing import Any

from rmspec.errors import DataError
from rmspec.spec.row_kinds import RowKind


def augment_rows(
    rows: list[dict[str, Any]], specs: list[Any], approach: str
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """New canonical pair records from the (kept, non-augmented) training rows."""
    if not specs:
        return [], {}
    if approach != RowKind.PAIRS:
        raise DataError(
            f"data.augment makes pairs, but approach.kind is {approach}", "remove data.augment or train bradley_terry"
        )
    made: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for spec in specs:
        new = {
            "cross_prompt_negatives": _cross_prompt,
            "truncated_negatives": _truncated,
            "pairs_from_scores": _from_scores,
        }[spec.kind](rows, spec)
        counts[spec.kind] = len(new)
        made.extend(new)
    return made, counts


def _record(
    row: dict[str, Any],
    chosen: str,
    rejected: str,
    suffix: str,
    margin: float = 0.0,
    sc: float | None = None,
    sr: float | None = None,
) -> dict[str, Any]:
    return {
        **row,
        "id": f"{row['id']}-{suffix}",
        "chosen": chosen,
        "rejected": rejected,
        "margin": margin,
        "score_chosen": sc,
        "score_rejected": sr,
        "augmented": True,
        "raw": "",
        "tie": False,
    }


def _cross_prompt(rows: list[dict[str, Any]], spec: Any) -> list[dict[str, Any]]:
    if len({r["prompt_key"] for r in rows}) < 2:
        return []
    rng = random.Random(spec.seed)
    k = round(len(rows) * spec.fraction)
    out = []
    for row in rng.sample(rows, min(k, len(rows))):
        other = rng.choice(rows)
        while other["prompt_key"] == row["prompt_key"]:
            other = rng.choice(rows)
        out.append(_record(row, row["chosen"], other["chosen"], "xneg"))
    return out


def _truncated(rows: list[dict[str, Any]], spec: Any) -> list[dict[str, Any]]:
    rng = random.Random(spec.seed)
    candidates = [r for r in rows if len(r["chosen"].split()) >= 4]
    k = round(len(rows) * spec.fraction)
    out = []
    for row in rng.sample(candidates, min(k, len(candidates))):
        words = row["chosen"].split(" ")
        cut = " ".join(words[: max(1, int(len(words) * spec.keep))])
        if cut.strip() != row["chosen"].strip():
            out.append(_record(row, row["chosen"], cut, "trunc"))
    return out


def _from_scores(rows: list[dict[str, Any]], spec: Any) -> list[dict[str, Any]]:
    # Which score it reads (spec.attribute) is checked when the spec loads (rmspec.spec.option_rules).
    by_prompt: dict[str, dict[str, float]] = {}
    first: dict[str, dict[str, Any]] = {}
    existing = set()
    for r in rows:
        if r["score_chosen"] is None or r["score_rejected"] is None:
            continue
        responses = by_prompt.setdefault(r["prompt_key"], {})
        responses.setdefault(r["chosen"], r["score_chosen"])
        responses.setdefault(r["rejected"], r["score_rejected"])
        first.setdefault(r["prompt_key"], r)
        existing.add((r["prompt_key"], r["chosen"], r["rejected"]))
    out: list[dict[str, Any]] = []
    for key, responses in by_prompt.items():
        items = sorted(responses.items(), key=lambda kv: -kv[1])
        for i, (a, sa) in enumerate(items):
            for b, sb in items[i + 1 :]:
                if sa - sb >= spec.min_gap and (key, a, b) not in existing:
                    out.append(_record(first[key], a, b, f"score{len(out)}", sa - sb, sa, sb))
    return out
