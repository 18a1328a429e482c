"""PRMBench (Song et al. 2025; github.com/ssmisya/PRMBench, task `prmtest_classified`; data
hitsmy/PRMBench_Preview): is each step of a modified solution valid?

Rows: `idx`, `classification`, `original_question`, `modified_question`, `question`,
`original_process` and `modified_process` (lists of steps), `modified_steps`, `error_steps`
(1-based indices into `modified_process`), `reason`. rmspec scores `modified_question` with its
`modified_process` (`question` where `modified_question` is absent). Each redundancy row also
yields the synthetic "correct" sample of the official task: `correct_<idx>`, its
`original_question` with its `original_process`, every step valid.

Official rule:
- a step is flagged valid when the model's score is > 0.5 (strict; a process reward model's
  score is its P(correct) per step, rmspec.inference.process);
- per class, the confusion matrix of valid steps: F1 counts valid steps as positive, "negative
  F1" counts error steps as positive; PRMScore = 0.5·F1 + 0.5·negative F1, except
  multi_solutions (F1 only: its solutions have no error step);
- the headline PRMScore comes from the confusion matrix summed over every class except the
  synthetic "correct" samples;
- the group scores are unweighted means of the class scores: simplicity (redundancy, circular),
  soundness (counterfactual, step_contradiction, domain_inconsistency, confidence), sensitivity
  (missing_condition, deception, multi_solutions).

Undefined metrics: an F1 with no positive to find (a class with no error steps has no negative
F1, one with no valid steps no F1). The official code writes -1 for a precision or recall over an
empty set, feeds that -1 into F1's formula (`official_f1`), and averages the result into the class
and group scores; rmspec reports such an F1 as undefined (None), leaves it out of its means and
says so in the entry's notes. The official figures, quirks included, are kept in
`details.official` so the published numbers can be reproduced exactly. As the official task does,
a repeated (classification, idx) is scored once (the first), and the repeats are counted in a note.

Per-example rows: `id` (idx), `subset` (class), `step_scores`, `step_labels` (1 valid, 0 error),
`step_predictions` (1 when score > 0.5), `error_steps` (1-based), `steps_total`, `threshold`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.kinds.records import Fields, Record, read_records
from rmspec.evaluate.loading import BenchmarkData, Example, load_rows, resolve_source

THRESHOLD = 0.5  # official: valid when score > 0.5
GROUPS = {
    "simplicity": ("redundancy", "circular"),
    "soundness": ("counterfactual", "step_contradiction", "domain_inconsistency", "confidence"),
    "sensitivity": ("missing_condition", "deception", "multi_solutions"),
}
CLASSES = tuple(c for members in GROUPS.values() for c in members)
F1_ONLY = ("multi_solutions",)
CORRECT = "correct"  # the synthetic samples redundancy rows yield: outside the headline
ALIASES = {"redundency": "redundancy"}  # a spelling seen in PRMBench's own code
HINT = (
    "PRMBench rows (prmtest_classified): idx, classification, modified_question, modified_process "
    "(a list of steps), error_steps (1-based step numbers), and for redundancy rows original_question "
    "and original_process"
)


# ----------------------------------------------------------------- the official rule


def class_name(raw: str) -> str:
    name = "_".join(str(raw).strip().lower().replace("-", " ").split())
    return ALIASES.get(name, name)


@dataclass
class Confusion:
    """Steps, valid as the positive class: tp valid->valid, fn valid->error, fp error->valid, tn error->error."""

    tp: int = 0
    fn: int = 0
    fp: int = 0
    tn: int = 0

    def add(self, gold_valid: Sequence[int], predicted_valid: Sequence[int]) -> None:
        for gold, pred in zip(gold_valid, predicted_valid, strict=True):
            if gold:
                self.tp, self.fn = self.tp + bool(pred), self.fn + (not pred)
            else:
                self.fp, self.tn = self.fp + bool(pred), self.tn + (not pred)

    def __iadd__(self, other: Confusion) -> Confusion:
        self.tp, self.fn, self.fp, self.tn = (
            self.tp + other.tp,
            self.fn + other.fn,
            self.fp + other.fp,
            self.tn + other.tn,
        )
        return self


def f1_score(tp: int, fp: int, fn: int) -> float | None:
    """F1 = 2·tp / (2·tp + fp + fn): the harmonic mean of precision and recall, 0 when no positive
    is found (precision over no prediction counts as 0). None (undefined) when there is no positive
    to find: recall over an empty set."""
    if tp + fn == 0:
        return None
    return 2 * tp / (2 * tp + fp + fn)


def official_f1(tp: int, fp: int, fn: int) -> float:
    """F1 exactly as the official code computes it, quirks included: precision and recall are -1
    over an empty denominator, and F1 = 2pr/(p+r), or -1 when p + r == 0. So no true positive with
    both errors present gives -1 (p = r = 0), no positive to find with a false alarm gives 0
    (p = 0, r = -1), and neither gives -1 (p = r = -1)."""
    precision = tp / (tp + fp) if tp + fp else -1.0
    recall = tp / (tp + fn) if tp + fn else -1.0
    return 2 * precision * recall / (precision + recall) if precision + recall != 0 else -1.0


def class_figures(confusion: Confusion, f1_only: bool = False) -> dict[str, Any]:
    """F1 (valid steps positive), negative F1 (error steps positive) and PRMScore; None = undefined."""
    c = confusion
    f1 = f1_score(c.tp, c.fp, c.fn)
    negative = f1_score(c.tn, c.fn, c.fp)
    both = None if f1 is None or negative is None else 0.5 * f1 + 0.5 * negative
    score = f1 if f1_only else both
    official_f1_, official_negative = official_f1(c.tp, c.fp, c.fn), official_f1(c.tn, c.fn, c.fp)
    return {
        "f1": f1,
        "negative_f1": negative,
        "prm_score": score,
        "official_prm_score": official_f1_ if f1_only else 0.5 * official_f1_ + 0.5 * official_negative,
        "valid_steps": c.tp + c.fn,
        "error_steps": c.fp + c.tn,
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_prmbench(
    classes: Sequence[str], gold_valid: Sequence[Sequence[int]], predicted_valid: Sequence[Sequence[int]]
) -> BenchmarkScore:
    """The official figures from each example's class, gold step validity and predicted validity."""
    by_class: dict[str, Confusion] = defaultdict(Confusion)
    counts: dict[str, int] = defaultdict(int)
    total = Confusion()
    for name, gold, pred in zip(classes, gold_valid, predicted_valid, strict=True):
        one = Confusion()
        one.add(gold, pred)
        by_class[name] += one
        counts[name] += 1
        if name != CORRECT:
            total += one
    order = [c for c in CLASSES if c in by_class] + sorted(c for c in by_class if c not in CLASSES)
    figures = {c: class_figures(by_class[c], c in F1_ONLY) for c in order}
    overall = class_figures(total)
    notes = [
        f"class {c}: PRMScore undefined (no {'valid' if f['f1'] is None else 'error'} steps, so no "
        f"{'F1' if f['f1'] is None else 'negative F1'}), left out of its group's mean; the official code "
        "gives it a figure from -1 precision or recall (details.official)"
        for c, f in figures.items()
        if c != CORRECT and f["prm_score"] is None
    ]
    unknown = [c for c in order if c not in CLASSES and c != CORRECT]
    if unknown:
        notes.append(f"classes outside PRMBench's groups (in the headline, in no group): {', '.join(unknown)}")
    groups, official_groups = {}, {}
    for group, members in GROUPS.items():
        present = [c for c in members if c in figures]
        if not present:
            continue
        official_groups[group] = sum(figures[c]["official_prm_score"] for c in present) / len(present)
        value = _mean([figures[c]["prm_score"] for c in present if figures[c]["prm_score"] is not None])
        if value is not None:
            groups[group] = value
        else:
            notes.append(f"group {group}: undefined (every class in it is undefined)")
    headline = overall["prm_score"]
    if headline is None:
        notes.append("the headline PRMScore is undefined: the files hold no error steps (or no valid steps)")
    details = {
        "threshold": THRESHOLD,
        "classes": figures,
        "total": {k: overall[k] for k in ("f1", "negative_f1", "prm_score", "valid_steps", "error_steps")},
        "official": {
            "overall": overall["official_prm_score"],
            "groups": official_groups,
            "classes": {c: f["official_prm_score"] for c, f in figures.items() if c != CORRECT},
            "note": "as the official code computes them: an undefined F1 is -1, averaged in",
        },
    }
    subsets = {c: f["prm_score"] for c, f in figures.items() if c != CORRECT and f["prm_score"] is not None}
    return BenchmarkScore(
        "prmbench", float("nan") if headline is None else headline, groups, subsets, dict(counts), details, notes
    )


# ----------------------------------------------------------------- the files


def _error_steps(fields: Fields, steps: int) -> tuple[list[int], list[int]]:
    """(error steps within 1..steps, those outside it). The released files have 100 of 6,216 rows
    naming a step past the end of modified_process; the official rule never matches such a step to
    one it scores, so it has no effect there, and rmspec counts the rows in a note."""
    got = fields.get(
        "error_steps",
        lambda v: isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v),
        "a list of step numbers (1-based)",
    )
    inside = sorted({i for i in got if 1 <= i <= steps})
    return inside, sorted({i for i in got if not 1 <= i <= steps})


def examples_of(record: Record) -> list[Example]:
    """The row's example, and for a redundancy row also its synthetic correct sample."""
    fields = Fields("prmbench", record, HINT)
    value = record.value
    idx = fields.ident("idx")
    name = class_name(fields.text("classification"))
    question = fields.text("modified_question" if "modified_question" in value else "question")
    steps = fields.texts("modified_process")
    errors, outside = _error_steps(fields, len(steps))
    out = [Example(idx, name, question, steps, {"error_steps": errors, "error_steps_outside": outside})]
    if name == "redundancy":
        original = fields.text("original_question" if "original_question" in value else "question")
        out.append(Example(f"correct_{idx}", CORRECT, original, fields.texts("original_process"), {"error_steps": []}))
    return out


def load_prmbench(path: str | None, *, split: str | None, limit: int | None, base_dir: Any) -> BenchmarkData:
    source, local = resolve_source("prmbench", path, base_dir)
    if local:
        records = read_records("prmbench", source, HINT)
        split = None
    else:
        rows, split = load_rows("prmbench", source, False, split, ("idx", "classification", "modified_process"))
        records = [Record(f"{source} row {i}", r, source) for i, r in enumerate(rows)]
    if limit is not None:
        records = records[:limit]
    examples, seen, repeated = [], set(), 0
    for example in (e for r in records for e in examples_of(r)):
        # The official task keeps the first of each (class, idx) and drops the rest (its released
        # multi_solutions file repeats 5 of its 165 ids); rmspec does the same, and counts them.
        key = (example.subset, example.id)
        if key in seen:
            repeated += example.subset != CORRECT
            continue
        seen.add(key)
        examples.append(example)
    if not examples:
        raise DataError(f"benchmark 'prmbench': {source} has no rows", HINT)
    data = BenchmarkData("prmbench", source, split, examples)
    outside = sum(bool(e.meta.get("error_steps_outside")) for e in examples)
    if outside:
        data.notes.append(
            f"{outside} row(s) name error steps past the end of modified_process: those step numbers match no "
            "scored step, so they count for nothing, as in the official rule"
        )
    if repeated:
        data.notes.append(
            f"{repeated} row(s) repeat an (classification, idx) already read: the first is scored and the "
            "repeats are left out, as the official task does"
        )
    return data


def prmbench_rows(engine: Any, data: BenchmarkData) -> list[dict[str, Any]]:
    """Score every example's steps with a StepEngine (P(correct) per step); one JSONL row each."""
    probs = engine.step_probabilities([(ex.prompt, ex.responses) for ex in data.examples])
    rows = []
    for ex, p in zip(data.examples, probs, strict=True):
        errors = set(ex.meta["error_steps"])
        scores = [float(v) for v in p]  # unrounded: 0.5000004 is valid (> 0.5); rounding is for display only
        rows.append(
            {
                "id": ex.id,
                "subset": ex.subset,
                "step_scores": scores,
                "step_labels": [0 if k in errors else 1 for k in range(1, len(scores) + 1)],
                "step_predictions": [int(s > THRESHOLD) for s in scores],
                "error_steps": sorted(errors),
                "steps_total": len(ex.responses),
                "threshold": THRESHOLD,
            }
        )
    return rows


def step_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Step accuracy (valid when score > 0.5), AUROC of the scores of valid vs error steps, and
    their distributions, over every row (the synthetic correct samples included)."""
    import numpy as np

    scores = np.array([s for r in rows for s in r["step_scores"]], dtype=np.float64)
    gold = np.array([y for r in rows for y in r["step_labels"]], dtype=np.int64)
    out: dict[str, Any] = {"num_examples": len(rows), "threshold": THRESHOLD, "steps_scored": int(scores.size)}
    if scores.size:
        out["step_accuracy"] = float(((scores > THRESHOLD).astype(np.int64) == gold).mean())
    good, bad = scores[gold == 1], scores[gold == 0]
    if good.size and bad.size:
        from sklearn.metrics import roc_auc_score

        out["auroc"] = float(roc_auc_score(gold, scores))
    bins = np.linspace(0.0, 1.0, 11)
    out["step_scores"] = {
        "bins": [round(float(b), 2) for b in bins],
        "correct": np.histogram(good, bins=bins)[0].tolist(),
        "wrong": np.histogram(bad, bins=bins)[0].tolist(),
        "mean_correct": float(good.mean()) if good.size else None,
        "mean_wrong": float(bad.mean()) if bad.size else None,
    }
    return out


def _shown(value: float | None, official: bool = False) -> str:
    if value is None:
        return "undefined"
    return f"{value:.3f}" if official else f"{100 * value:.1f}%"


class PRMBench(BenchmarkKind):
    name = "prmbench"
    columns = ("idx", "classification", "modified_process")

    def load(
        self,
        path: str | None,
        *,
        split: str | None = None,
        preset: str | None = None,
        limit: int | None = None,
        base_dir: Any = None,
    ) -> BenchmarkData:
        if preset is not None:
            raise DataError("benchmark 'prmbench': preset applies to kind 'pairs' only", "remove preset")
        return load_prmbench(path, split=split, limit=limit, base_dir=base_dir)

    def scored_rows(self, engine: Any, data: BenchmarkData) -> list[dict[str, Any]]:
        return prmbench_rows(engine, data)

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        """Recomputed from the saved step scores (valid when > 0.5), by the rule above."""
        score = score_prmbench(
            [str(r.get("subset") or "all") for r in rows],
            [[int(y) for y in r["step_labels"]] for r in rows],
            [[int(float(s) > THRESHOLD) for s in r["step_scores"]] for r in rows],
        )
        cut = [r for r in rows if int(r.get("steps_total") or 0) > len(r["step_scores"])]
        if cut:
            score.notes.append(
                f"{len(cut)} example(s) longer than the model's max_length: their last "
                f"{sum(int(r['steps_total']) - len(r['step_scores']) for r in cut)} step(s) got no score and are not counted"
            )
        return score

    def step_diagnostics(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return step_metrics(rows)

    def report_html(self, entry: Mapping[str, Any]) -> list[str]:
        from rmspec.evaluate.html_parts import esc, table

        details = entry.get("details") or {}
        classes = details.get("classes") or {}
        official = details.get("official") or {}
        if not classes:
            return []
        group_of = {c: g for g, members in GROUPS.items() for c in members}
        rows = [
            (
                c,
                group_of.get(c, "-" if c != CORRECT else "(synthetic, not in the headline)"),
                _shown(f["f1"]),
                _shown(f["negative_f1"]),
                _shown(f["prm_score"]),
                _shown(f["official_prm_score"], official=True),
                (entry.get("counts") or {}).get(c, ""),
            )
            for c, f in classes.items()
        ]
        return [
            table(
                (
                    "class",
                    "group",
                    "F1",
                    "negative F1",
                    "PRMScore",
                    "official code's value (-1: undefined)",
                    "examples",
                ),
                rows,
                numeric=(2, 3, 4, 5, 6),
            ),
            f"<p>A step is valid when its score is above {THRESHOLD}. Official headline as the official code "
            f"computes it: <b>{esc(_shown(official.get('overall'), official=True))}</b>.</p>",
        ]


KIND = PRMBench()
