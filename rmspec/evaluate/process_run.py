"""The end-of-run evaluation of a process reward model: validation steps and ProcessBench.

Validation rows come from the tokenized validation split (the labels sit where training put
them), so the scores are the trained model's on exactly the tokens it learned from. Each row:
`id`, `subset` (the row's group), `label` (first wrong step, -1), `prediction`, `step_scores`,
`step_labels`, `threshold`. With `approach.tune_threshold`, the threshold that maximises the
first-error F1 on validation is reported with every ProcessBench entry as `details.tuned`,
beside (never instead of) the figures at the spec's threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rmspec.evaluate import results as res
from rmspec.evaluate.benchmark_runs import evaluate_benchmarks, say
from rmspec.evaluate.kinds.processbench import first_error, tune_threshold, with_tuned
from rmspec.evaluate.validation import prepare_validation
from rmspec.rundir import RunDir
from rmspec.spec.benchmarks import PROCESS

IGNORE = -100


def step_f1(rows: Sequence[dict[str, Any]]) -> float | None:
    """F1 of the steps predicted wrong (P(correct) < the row's threshold) against the steps labelled
    wrong, over every step of every row; None when no step is labelled or predicted wrong."""
    hit = predicted = labelled = 0
    for row in rows:
        for score, label in zip(row["step_scores"], row["step_labels"]):
            wrong_pred, wrong_gold = score < row["threshold"], label == 0
            hit += wrong_pred and wrong_gold
            predicted += wrong_pred
            labelled += wrong_gold
    return 2 * hit / (predicted + labelled) if predicted + labelled else None


def validation_step_rows(engine: Any, validation: Any, threshold: float) -> list[dict[str, Any]]:
    from rmspec.inference.process import token_probabilities

    rows = list(validation)
    probs = token_probabilities(
        engine.model,
        [r["input_ids"] for r in rows],
        [r.get("token_type_ids") for r in rows],
        engine.tokenizer.pad_token_id,
        engine.batch_size,
    )
    out = []
    for i, (r, p) in enumerate(zip(rows, probs)):
        at = [k for k, lab in enumerate(r["labels"]) if lab != IGNORE]
        labels = [int(r["labels"][k]) for k in at]
        scores = [float(p[k]) for k in at]  # unrounded: thresholded below and when re-read
        out.append(
            {
                "id": str(r.get("id", i)),
                "subset": str(r.get("group") or "all"),
                "label": next((k for k, y in enumerate(labels) if y == 0), -1),
                "prediction": first_error(scores, threshold),
                "step_scores": scores,
                "step_labels": labels,
                "threshold": threshold,
            }
        )
    return out


def evaluate_process_run(
    rd: RunDir,
    loaded_spec: Any,
    results: dict[str, Any],
    *,
    model: Any,
    tokenizer: Any,
    validation: Any,
    requests: Sequence[Any],
    batch_size: int | None,
    progress: Callable[[str], None] | None,
) -> None:
    from rmspec.inference.process import StepEngine, load_token_classifier

    spec = loaded_spec.spec
    if model is None or tokenizer is None:
        model, tokenizer = load_token_classifier(rd.model)
    engine = StepEngine.from_parts(model, tokenizer, spec, batch_size=batch_size or spec.eval.batch_size)
    threshold = spec.approach.threshold
    results["threshold"] = {"value": threshold, "source": "approach.threshold"}
    tuned = None
    if spec.eval.validation:
        if validation is None:
            validation = prepare_validation(loaded_spec, tokenizer, results["notes"], rd.root / "cache")
        if validation is not None and len(validation):
            say(progress, "scoring the validation steps")
            rows = validation_step_rows(engine, validation, threshold)
            path = rd.eval_dir / "validation.jsonl"
            res.write_jsonl(path, rows)
            entry = res.entry("validation", "process_validation", rows, path, source="validation split", scorer=PROCESS)
            entry["metrics"] = {
                "step_f1": step_f1(rows),
                "first_error_accuracy": entry["diagnostics"].get("first_error_accuracy"),
            }
            results["validation"] = entry
            if spec.approach.tune_threshold:
                value, f1 = tune_threshold(rows)
                tuned = value
                results["threshold"]["tuned"] = {
                    "value": value,
                    "validation_f1": f1,
                    "tuned_on": "validation split",
                    "used_for_headline": False,
                }
    if spec.approach.tune_threshold and tuned is None:
        results["notes"].append("tune_threshold: no validation rows, so no threshold was tuned")
    evaluate_benchmarks(engine, requests, rd.eval_dir, results, base_dir=loaded_spec.base_dir, progress=progress)
    for entry in results["benchmarks"].values():
        # the tuned threshold moves ProcessBench's first-error prediction; PRMBench's rule fixes 0.5 (each
        # entry here is the StepEngine's: evaluate_benchmarks skips a kind a process model cannot score)
        if entry.get("kind") == "processbench" and tuned is not None:
            with_tuned(entry, res.read_jsonl(rd.eval_dir / f"{entry['name']}.jsonl"), tuned, "validation split")
