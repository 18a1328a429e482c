"""ProcessBench (Qwen/ProcessBench): find the first wrong step of a math solution.

From the hub: the four splits (gsm8k, math, olympiadbench, omnimath), or the one named. From a
local JSON/JSONL/Parquet file in the official schema (`id`, `problem`, `steps`, `label`): the
split is the `split` column, or else the id's prefix before the first `-` (official ids read
`gsm8k-0`, `math-12`).

Scoring (`score_processbench`) is the official rule: the prediction
is the first step with P(correct) < threshold (or -1), and per split acc_error, acc_correct
and their harmonic mean F1; the figure is the mean F1 over splits. The threshold is the spec's
(0.5 by default); a threshold tuned on the validation split is reported beside it, labelled as
tuned, and never replaces it.

Per-example rows: `id`, `subset` (the split), `label`, `prediction`, `step_scores`, `threshold`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore, check_lengths, mean
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import BenchmarkData, Example, guard_file, resolve_source
from rmspec.inference.process import first_error as first_error  # re-exported: the rule ProcessBench scores with

REQUIRED = ("problem", "steps", "label")


# ----------------------------------------------------------------- the official rule

# The prediction rule (first step under the threshold) is the PRM's own: rmspec.inference.process.
PROCESSBENCH_SPLITS = ("gsm8k", "math", "olympiadbench", "omnimath")


def processbench_split(labels: Sequence[int], predictions: Sequence[int]) -> dict[str, Any]:
    """Official per-split figures (Qwen/ProcessBench code/run_eval_prm_*.py), as fractions:
    acc_error over rows with an error (label != -1), acc_correct over rows without (label == -1),
    f1 their harmonic mean. A side with no rows has no accuracy (None, the official code's NaN)
    and then no F1; both accuracies 0 give F1 0 (the official code divides 0 by 0)."""
    check_lengths(labels=labels, predictions=predictions)
    err = [int(p) == int(y) for y, p in zip(labels, predictions) if int(y) != -1]
    ok = [int(p) == int(y) for y, p in zip(labels, predictions) if int(y) == -1]
    acc_error = mean([float(v) for v in err]) if err else None
    acc_correct = mean([float(v) for v in ok]) if ok else None
    if acc_error is None or acc_correct is None:
        f1 = None
    elif acc_error + acc_correct == 0:
        f1 = 0.0
    else:
        f1 = 2 * acc_error * acc_correct / (acc_error + acc_correct)
    return {"acc_error": acc_error, "acc_correct": acc_correct, "f1": f1, "num_error": len(err), "num_correct": len(ok)}


def score_processbench(
    splits: Sequence[str], labels: Sequence[int], predictions: Sequence[int], threshold: float | None = None
) -> BenchmarkScore:
    """Per split: acc_error, acc_correct, F1; overall: the mean F1 over the splits that have one."""
    check_lengths(splits=splits, labels=labels, predictions=predictions)
    by_split: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(splits):
        by_split[name].append(i)
    order = [s for s in PROCESSBENCH_SPLITS if s in by_split] + sorted(
        s for s in by_split if s not in PROCESSBENCH_SPLITS
    )
    per_split, f1s, notes = {}, {}, []
    for name in order:
        idx = by_split[name]
        figures = processbench_split([labels[i] for i in idx], [predictions[i] for i in idx])
        per_split[name] = figures
        if figures["f1"] is None:
            side = "erroneous" if figures["acc_error"] is None else "correct"
            notes.append(f"split {name}: no {side} samples, so no F1 (left out of the mean)")
        else:
            f1s[name] = figures["f1"]
    overall = mean(list(f1s.values())) if f1s else float("nan")
    details: dict[str, Any] = {"splits": per_split, "threshold": threshold}
    counts = {name: len(by_split[name]) for name in order}
    return BenchmarkScore("processbench", overall, {}, f1s, counts, details, notes)


# ----------------------------------------------------------------- loading and scoring


def split_of(row: dict[str, Any], index: int) -> str:
    if row.get("split"):
        return str(row["split"])
    ident = str(row.get("id") or "")
    if "-" in ident:
        return ident.split("-", 1)[0]
    return "all"


def examples_from_rows(
    rows: Sequence[dict[str, Any]], source: str, split: str | None = None
) -> tuple[list[Example], list[str]]:
    out, skipped = [], 0
    for index, row in enumerate(rows):
        steps, label = row.get("steps"), row.get("label")
        if (
            not isinstance(steps, list)
            or not steps
            or not all(isinstance(s, str) for s in steps)
            or isinstance(label, bool)
            or not isinstance(label, int)
            or not -1 <= label < len(steps)
        ):
            skipped += 1
            continue
        name = split or split_of(row, index)
        out.append(
            Example(
                str(row.get("id", f"{name}-{index}")), name, str(row["problem"]), list(steps), {"label": int(label)}
            )
        )
    notes = (
        [
            f"{skipped} row(s) of {source} skipped: steps must be a non-empty list of texts and label an index into it or -1"
        ]
        if skipped
        else []
    )
    return out, notes


def load_processbench(
    path: str | None = None, *, split: str | None = None, limit: int | None = None, base_dir: Path | None = None
) -> BenchmarkData:
    import datasets

    source, local = resolve_source("processbench", path, base_dir)
    parts: list[tuple[str | None, list[dict[str, Any]]]] = []
    try:
        if local:
            builder = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}.get(Path(source).suffix.lower())
            if builder is None:
                raise DataError(
                    f"benchmark 'processbench': cannot read {source}", "use a .jsonl, .json or .parquet file"
                )
            guard_file("processbench", source, builder)
            rows = datasets.load_dataset(builder, data_files=source, split="train").to_list()
            if split is not None:
                rows = [r for i, r in enumerate(rows) if split_of(r, i) == split]
            parts.append((None, rows))
        else:
            for name in [split] if split else PROCESSBENCH_SPLITS:
                parts.append((name, datasets.load_dataset(source, split=name).to_list()))
    except DataError:
        raise
    except Exception as exc:
        raise DataError(
            f"benchmark 'processbench': cannot load {source}: {' '.join(str(exc).split())[:300]}",
            "offline, point path at a local JSONL file in ProcessBench's schema (id, problem, steps, label)",
        ) from None
    examples, notes = [], []
    for part, rows in parts:
        if rows:
            missing = [c for c in REQUIRED if c not in rows[0]]
            if missing:
                raise DataError(
                    f"benchmark 'processbench': {source} lacks column(s) {', '.join(missing)} (has: {', '.join(rows[0])})",
                    "ProcessBench rows need problem, steps (a list) and label (first wrong step, or -1)",
                )
        if limit is not None:
            rows = rows[:limit]
        got, why = examples_from_rows(rows, source, part)
        examples += got
        notes += why
    if not examples:
        raise DataError(
            f"benchmark 'processbench': no usable rows in {source}" + (f" (split {split})" if split else ""),
            "check the file and the split",
        )
    return BenchmarkData("processbench", source, split, examples, notes)


def processbench_rows(engine: Any, data: BenchmarkData, threshold: float | None = None) -> list[dict[str, Any]]:
    """Score every example's steps with a StepEngine; one JSONL row per example."""
    threshold = engine.threshold if threshold is None else threshold
    probs = engine.step_probabilities([(ex.prompt, ex.responses) for ex in data.examples])
    rows = []
    for ex, p in zip(data.examples, probs):
        rows.append(
            {
                "id": ex.id,
                "subset": ex.subset,
                "label": ex.meta["label"],
                "prediction": first_error(p, threshold),
                "step_scores": [float(v) for v in p],  # unrounded: the threshold sweep re-reads them
                "steps_total": len(ex.responses),
                "threshold": threshold,
            }
        )
    return rows


def repredict(rows: Sequence[dict[str, Any]], threshold: float) -> list[int]:
    """Predictions at another threshold, from the saved step scores."""
    return [first_error(r["step_scores"], threshold) for r in rows]


def tune_threshold(rows: Sequence[dict[str, Any]], grid: Sequence[float] | None = None) -> tuple[float, float]:
    """(threshold, mean F1) maximising the mean F1 of these rows (ties: the threshold nearest 0.5)."""
    grid = list(grid) if grid is not None else [round(0.05 * k, 2) for k in range(1, 20)]
    splits = [str(r.get("subset") or "all") for r in rows]
    labels = [int(r["label"]) for r in rows]
    best: tuple[tuple[float, float], float, float] | None = None  # (key, threshold, F1)
    for t in grid:
        f1 = score_processbench(splits, labels, repredict(rows, t)).overall
        f1 = -1.0 if f1 != f1 else f1  # NaN: no split had both kinds of rows
        key = (f1, -abs(t - 0.5))
        if best is None or key > best[0]:
            best = (key, t, f1)
    assert best is not None, "an empty threshold grid"
    return best[1], best[2]


def with_tuned(entry: dict[str, Any], rows: Sequence[dict[str, Any]], threshold: float, tuned_on: str) -> None:
    """Add the figures at a tuned threshold to a results entry, labelled as tuned (the headline stays)."""
    score = score_processbench(
        [str(r.get("subset") or "all") for r in rows],
        [int(r["label"]) for r in rows],
        repredict(rows, threshold),
        threshold,
    )
    entry["details"]["tuned"] = {
        "threshold": threshold,
        "tuned_on": tuned_on,
        "overall": score.overall,
        "splits": score.details["splits"],
        "note": "tuned threshold: reported beside the headline figure, never in its place",
    }


def first_error_confusion(rows: Sequence[Mapping[str, Any]], cap: int = 5) -> dict[str, Any]:
    """Gold first error (rows) x predicted first error (columns), indices past `cap` pooled as `cap+`."""

    def bucket(v: int) -> str:
        return "none" if v == -1 else (f"{cap}+" if v >= cap else str(v))

    names = ["none", *[str(i) for i in range(cap)], f"{cap}+"]
    table = {g: {p: 0 for p in names} for g in names}
    for r in rows:
        table[bucket(int(r["label"]))][bucket(int(r["prediction"]))] += 1
    used = [n for n in names if any(table[n].values()) or any(table[g][n] for g in names)]
    return {"labels": used, "matrix": [[table[g][p] for p in used] for g in used]}


def step_score_split(rows: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[float]]:
    """(scores of steps known correct, scores of steps known wrong): steps before the first error are
    correct, the first error is wrong, steps after it are unknown and left out."""
    good: list[float] = []
    bad: list[float] = []
    for r in rows:
        if r.get("step_labels") is not None:  # validation rows know every step's label
            for s, y in zip(r["step_scores"], r["step_labels"]):
                (good if int(y) == 1 else bad).append(float(s))
            continue
        label = int(r["label"])
        for i, s in enumerate(r["step_scores"]):
            if label == -1 or i < label:
                good.append(float(s))
            elif i == label:
                bad.append(float(s))
    return good, bad


def process_diagnostics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the report draws for a PRM: step-level metrics, the first-error confusion table and the
    step-score distributions of correct and wrong steps (steps after a first error are unknown)."""
    import numpy as np

    good, bad = step_score_split(rows)
    threshold = rows[0].get("threshold", 0.5) if rows else 0.5
    out: dict[str, Any] = {
        "num_examples": len(rows),
        "threshold": threshold,
        "first_error_confusion": first_error_confusion(rows),
    }
    scores = np.array(good + bad, dtype=np.float64)
    gold = np.array([1] * len(good) + [0] * len(bad), dtype=np.int64)
    if scores.size:
        out["step_accuracy"] = float(((scores >= threshold).astype(np.int64) == gold).mean())
        out["steps_scored"] = int(scores.size)
    if good and bad:
        from sklearn.metrics import roc_auc_score

        out["auroc"] = float(roc_auc_score(gold, scores))
    if rows:
        out["first_error_accuracy"] = float(np.mean([int(r["label"]) == int(r["prediction"]) for r in rows]))
    bins = np.linspace(0.0, 1.0, 11)
    out["step_scores"] = {
        "bins": [round(float(b), 2) for b in bins],
        "correct": np.histogram(good, bins=bins)[0].tolist(),
        "wrong": np.histogram(bad, bins=bins)[0].tolist(),
        "mean_correct": float(np.mean(good)) if good else None,
        "mean_wrong": float(np.mean(bad)) if bad else None,
    }
    return out


class ProcessBench(BenchmarkKind):
    name = "processbench"
    columns = REQUIRED

    def load(
        self,
        path: str | None,
        *,
        split: str | None = None,
        preset: str | None = None,
        limit: int | None = None,
        base_dir: Any = None,
    ) -> BenchmarkData:
        return load_processbench(path, split=split, limit=limit, base_dir=base_dir)

    def scored_rows(self, engine: Any, data: BenchmarkData) -> list[dict[str, Any]]:
        return processbench_rows(engine, data)

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        thresholds = {r.get("threshold") for r in rows}
        return score_processbench(
            [str(r.get("subset") or "all") for r in rows],
            [int(r["label"]) for r in rows],
            [int(r["prediction"]) for r in rows],
            thresholds.pop() if len(thresholds) == 1 else None,
        )

    def step_diagnostics(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return process_diagnostics(rows)


KIND = ProcessBench()
