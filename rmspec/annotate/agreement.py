"""Inter-annotator agreement on the pairwise preference, through the field's reference packages.

Every figure is computed on the preference in SOURCE order (A/B swap undone, so "prefers the
first response" means the same whichever side it was shown on), with a tie as its own category
(first / second / tie), leaving out cancelled and invalid annotations:

- Cohen's kappa for each pair of annotators, on the tasks both labelled (scikit-learn);
- Fleiss' kappa (statsmodels `aggregate_raters` + `fleiss_kappa`), which needs the same number of
  ratings per task: it uses the tasks with the most common count (>= 2) and says how many;
- Krippendorff's alpha, nominal (package `krippendorff`), which takes missing ratings as they are;
- each annotator's agreement with the majority label (the label `import --policy majority`
  writes, on tasks with >= 2 ratings and a strict majority), and the tasks where annotators differ;
- optionally a model's agreement with the non-tie majority labels.

A figure that is undefined (fewer than two items, or only one category in the data: chance
agreement is then 1) is None with the reason, not a NaN.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from typing import Any

from rmspec.annotate import kinds
from rmspec.annotate.records import FIRST, SECOND, TIE, Task
from rmspec.errors import DataError

CATEGORIES = (FIRST, SECOND, TIE)
CODE = {c: i for i, c in enumerate(CATEGORIES)}


def labels_by_task(tasks: list[Task]) -> dict[Any, dict[str, str]]:
    """task id -> {annotator: preference}, valid annotations of a kind with preferences (pairwise) only."""
    out: dict[Any, dict[str, str]] = {}
    for task in tasks:
        if task.error or not kinds.of(task.kind).preferences:
            continue
        votes = {
            a.annotator: a.preference for a in task.annotations if not a.cancelled and not a.error and a.preference
        }
        if votes:
            out[task.task_id] = votes
    return out


def majority(votes: dict[str, str]) -> str | None:
    ranked = Counter(votes.values()).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


def _finite(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 6)


def cohen(labels: dict[Any, dict[str, str]], annotators: list[str]) -> list[dict[str, Any]]:
    from sklearn.metrics import cohen_kappa_score

    rows = []
    for a, b in itertools.combinations(annotators, 2):
        shared = [votes for votes in labels.values() if a in votes and b in votes]
        y1, y2 = [v[a] for v in shared], [v[b] for v in shared]
        row: dict[str, Any] = {
            "a": a,
            "b": b,
            "items": len(shared),
            "observed": round(sum(x == y for x, y in zip(y1, y2)) / len(shared), 6) if shared else None,
        }
        if len(shared) < 2:
            row.update(kappa=None, note="fewer than 2 shared items")
        elif len(set(y1) | set(y2)) < 2:
            row.update(kappa=None, note="one category only: chance agreement is 1, kappa undefined")
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                row["kappa"] = _finite(cohen_kappa_score(y1, y2, labels=list(CATEGORIES)))
        rows.append(row)
    return rows


def fleiss(labels: dict[Any, dict[str, str]]) -> dict[str, Any]:
    import numpy as np
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    counts = Counter(len(v) for v in labels.values() if len(v) >= 2)
    if not counts:
        return {"kappa": None, "items": 0, "raters_per_item": None, "note": "no task has 2 or more ratings"}
    k = max(counts, key=lambda n: (counts[n], n))
    used = [v for v in labels.values() if len(v) == k]
    data = np.array([[CODE[p] for p in v.values()] for v in used])
    table, _ = aggregate_raters(data, n_cat=len(CATEGORIES))
    out = {"items": len(used), "raters_per_item": k, "items_left_out": sum(counts.values()) - len(used)}
    if (table.sum(axis=0) > 0).sum() < 2 or len(used) < 2:
        return {**out, "kappa": None, "note": "fewer than 2 items or one category only: kappa undefined"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {**out, "kappa": _finite(fleiss_kappa(table, method="fleiss"))}


def krippendorff_alpha(labels: dict[Any, dict[str, str]], annotators: list[str]) -> dict[str, Any]:
    import krippendorff
    import numpy as np

    units = [v for v in labels.values() if len(v) >= 2]  # a unit rated once carries no pairable value
    pairable = sum(len(v) for v in units)
    if not units or len({p for v in units for p in v.values()}) < 2:
        return {
            "alpha": None,
            "items": len(units),
            "pairable_values": pairable,
            "note": "needs 2+ ratings on some task and 2+ categories",
        }
    data = np.full((len(annotators), len(units)), np.nan)
    for j, votes in enumerate(units):
        for i, annotator in enumerate(annotators):
            if annotator in votes:
                data[i, j] = CODE[votes[annotator]]
    value = krippendorff.alpha(
        reliability_data=data, level_of_measurement="nominal", value_domain=list(range(len(CATEGORIES)))
    )
    return {"alpha": _finite(value), "items": len(units), "pairable_values": pairable}


def versus_majority(labels: dict[Any, dict[str, str]], annotators: list[str]) -> list[dict[str, Any]]:
    rows = []
    for a in annotators:
        hits = n = 0
        for votes in labels.values():
            top = majority(votes) if len(votes) >= 2 else None
            if a in votes and top is not None:
                n += 1
                hits += votes[a] == top
        rows.append({"annotator": a, "items": n, "agreement": round(hits / n, 6) if n else None})
    return rows


def disagreements(tasks: list[Task], labels: dict[Any, dict[str, str]]) -> list[dict[str, Any]]:
    ids = {t.task_id: t.source_id for t in tasks}
    return [
        {"task_id": tid, "source_id": ids[tid], "labels": votes, "majority": majority(votes)}
        for tid, votes in labels.items()
        if len(set(votes.values())) > 1
    ]


def model_agreement(labels: dict[Any, dict[str, str]], scores: dict[Any, tuple[float, float]]) -> dict[str, Any]:
    """The model prefers the first response when its reward is higher; compared with non-tie majorities."""
    hits = n = 0
    for tid, votes in labels.items():
        top = majority(votes)
        if top in (FIRST, SECOND) and tid in scores:
            first, second = scores[tid]
            n += 1
            hits += (first > second) == (top == FIRST)
    return {"items": n, "agreement": round(hits / n, 6) if n else None}


def agreement(tasks: list[Task], model_scores: dict[Any, tuple[float, float]] | None = None) -> dict[str, Any]:
    refusals = [kinds.of(t.kind).agreement_refusal for t in tasks if not t.error]
    refusal = next((r for r in refusals if r), None)  # a kind agreement cannot compare (pointwise ratings)
    if refusal:
        raise DataError(
            f"agreement is computed on pairwise preferences; {refusal}",
            "export a pairwise project (rmspec annotate export of a bradley_terry spec or a file of pairs)",
        )
    labels = labels_by_task(tasks)
    if not labels:
        raise DataError(
            "the export has no valid pairwise annotation to compare",
            "label some tasks first; cancelled and invalid annotations do not count",
        )
    annotators = sorted({a for votes in labels.values() for a in votes}, key=lambda s: (len(s), s))
    out = {
        "tasks": len(tasks),
        "tasks_labelled": len(labels),
        "tasks_multiply_labelled": sum(1 for v in labels.values() if len(v) >= 2),
        "annotators": annotators,
        "annotations": sum(len(v) for v in labels.values()),
        "categories": list(CATEGORIES),
        "cohen": cohen(labels, annotators),
        "fleiss": fleiss(labels),
        "krippendorff": krippendorff_alpha(labels, annotators),
        "versus_majority": versus_majority(labels, annotators),
        "disagreements": disagreements(tasks, labels),
    }
    if model_scores is not None:
        out["model"] = model_agreement(labels, model_scores)
    return out
