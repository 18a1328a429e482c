"""The end-of-run evaluation of each shipped approach (its declaration's `evaluation` hook).

Every hook fills results.json the same way: `validation` holds the approach's own metrics under
`validation.metrics` (the names its declaration lists in `validation_metrics`), computed again from
the SAVED model (RUN/model) on the split training held out, with one per-example row each in
RUN/eval/validation.jsonl; `benchmarks` holds the spec's benchmarks (rmspec.evaluate.benchmark_runs).
A process reward model's hook is rmspec.evaluate.process_run.evaluate_process_run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rmspec.evaluate import results as res
from rmspec.evaluate.benchmark_runs import evaluate_benchmarks, say
from rmspec.evaluate.diagnostics import pairs_from_rows, reward_normalization, save_reward_stats
from rmspec.evaluate.results import METRICS
from rmspec.evaluate.validation import prepare_validation, validation_rows
from rmspec.inference import progress as scoring_progress
from rmspec.rundir import RunDir
from rmspec.spec.benchmarks import REWARD


def metrics_entry(rows: list[dict[str, Any]], path: Path, metrics: dict[str, Any], overall: float | None) -> dict:
    return {
        "name": "validation",
        "kind": METRICS,
        "overall": overall,
        "metrics": metrics,
        "num_examples": len(rows),
        "per_example_path": str(path.resolve()),
        "source": "validation split",
        "scorer": REWARD,
        "notes": [],
    }


# ---------------------------------------------------------------- score-head models


def _score_model(
    rd: RunDir,
    loaded_spec: Any,
    results: dict[str, Any],
    validate: Callable[[Any, Any], None],
    *,
    model: Any,
    tokenizer: Any,
    validation: Any,
    requests: Sequence[Any],
    batch_size: int | None,
    progress: Callable[[str], None] | None,
) -> None:
    """A score-head model: the validation split scored by `validate(engine, rows)`, the benchmarks,
    and the reward's mean/std into RUN/model/config.json."""
    from rmspec.evaluate.run_level import note_fresh_head
    from rmspec.inference.engine import RewardEngine
    from rmspec.inference.loading import load_reward_model

    spec = loaded_spec.spec
    if reads_images(rd.model):  # a VLM: the saved folder with its processor, images in every sequence
        from rmspec.inference.scorers.vision_reward import load_vision_engine

        engine: Any = load_vision_engine(rd.model, batch_size=batch_size, spec=spec)
        model, tokenizer = engine.model, engine.tokenizer
    else:
        if model is None or tokenizer is None:
            model, tokenizer = load_reward_model(rd.model)
        engine = RewardEngine.from_parts(model, tokenizer, spec, batch_size=batch_size)
    note_fresh_head(model, results)
    if spec.eval.validation:
        if validation is None:
            validation = prepare_validation(loaded_spec, tokenizer, results["notes"], rd.root / "cache")
        if validation is not None and len(validation):
            say(progress, "scoring the validation split")
            columns = getattr(validation, "column_names", None) or []
            total = 2 * len(validation) if "chosen_input_ids" in columns else None  # a pair: two sequences
            with scoring_progress.reporting(progress, "scoring the validation split", total):
                validate(engine, validation)
    evaluate_benchmarks(engine, requests, rd.eval_dir, results, base_dir=loaded_spec.base_dir, progress=progress)
    _reward_stats(rd, results)


def reads_images(model_dir: Path) -> bool:
    """The saved model is a vision-language model (the `vision_reward` scorer kind claims it)."""
    import json

    config = Path(model_dir) / "config.json"
    try:
        return "vision_config" in json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


def evaluate_pairs(rd: RunDir, loaded_spec: Any, results: dict[str, Any], **kw: Any) -> None:
    """Bradley-Terry: each held-out pair scored; pair accuracy (validation.metrics.accuracy)."""

    def validate(engine: Any, validation: Any) -> None:
        rows = validation_rows(validation, engine)
        if rows:
            path = rd.eval_dir / "validation.jsonl"
            res.write_jsonl(path, rows)
            entry = res.entry("validation", "validation", rows, path, source="validation split", scorer=REWARD)
            entry["metrics"] = {"accuracy": entry["overall"]}
            results["validation"] = entry

    _score_model(rd, loaded_spec, results, validate, **kw)


def evaluate_lists(rd: RunDir, loaded_spec: Any, results: dict[str, Any], **kw: Any) -> None:
    """Listwise: every response of each held-out list scored; pair accuracy over the ordered pairs with
    different labelled scores (a tie in rewards counts as wrong) and Kendall's tau-b per list, averaged
    over the lists where it is defined (scipy.stats.kendalltau)."""
    from rmspec.inference.encoding import Encoded

    def validate(engine: Any, validation: Any) -> None:
        from scipy.stats import kendalltau

        lists = list(validation)
        types = [r.get("responses_token_type_ids") or [None] * len(r["responses_input_ids"]) for r in lists]
        flat = [Encoded(ids, t) for r, ts in zip(lists, types) for ids, t in zip(r["responses_input_ids"], ts)]
        scores = iter(values[0] for values in engine.outputs(flat))
        rows, correct, labelled, taus = [], 0, 0, []
        for i, r in enumerate(lists):
            rewards = [next(scores) for _ in r["responses_input_ids"]]
            gold = list(r["scores"])
            for a in range(len(gold)):
                for b in range(a + 1, len(gold)):
                    if gold[a] != gold[b]:
                        labelled += 1
                        correct += (rewards[a] - rewards[b]) * (gold[a] - gold[b]) > 0
            tau = float(kendalltau(gold, rewards).statistic) if len(gold) > 1 else math.nan
            if not math.isnan(tau):
                taus.append(tau)
            rows.append(
                {
                    "id": str(r.get("id", i)),
                    "subset": str(r.get("group") or "all"),
                    "scores": gold,
                    "rewards": rewards,
                    "kendall_tau": None if math.isnan(tau) else tau,
                }
            )
        accuracy = correct / labelled if labelled else None
        metrics = {"pair_accuracy": accuracy, "kendall_tau": sum(taus) / len(taus) if taus else None}
        path = rd.eval_dir / "validation.jsonl"
        res.write_jsonl(path, rows)
        results["validation"] = metrics_entry(rows, path, metrics, accuracy)

    _score_model(rd, loaded_spec, results, validate, **kw)


def evaluate_scores(rd: RunDir, loaded_spec: Any, results: dict[str, Any], **kw: Any) -> None:
    """Pointwise: each held-out response scored; per attribute the mean absolute error and Pearson's r
    of the predicted score (an ordinal head: the expected score under its bins) against the label."""
    from rmspec.approaches.pointwise import bins
    from rmspec.inference.encoding import Encoded

    section = loaded_spec.spec.approach
    attributes = list(section.attributes)
    results["notes"].append("pointwise model: benchmarks rank by the first head output")

    def predicted(outputs: list[float]) -> list[float]:
        if section.objective != "ordinal":
            return list(outputs[: len(attributes)])
        k, out = bins(section), []
        for j in range(len(attributes)):
            logits = outputs[j * k : (j + 1) * k]
            top = max(logits)
            weights = [math.exp(v - top) for v in logits]
            out.append(section.scale.min + sum(b * w for b, w in enumerate(weights)) / sum(weights))
        return out

    def validate(engine: Any, validation: Any) -> None:
        from scipy.stats import pearsonr

        data = list(validation)
        outputs = engine.outputs([Encoded(r["input_ids"], r.get("token_type_ids") or None) for r in data])
        rows: list[dict[str, Any]] = []
        for i, (r, out) in enumerate(zip(data, outputs)):
            rows.append(
                {
                    "id": str(r.get("id", i)),
                    "subset": str(r.get("group") or "all"),
                    "scores": dict(zip(attributes, r["scores"])),
                    "predicted": dict(zip(attributes, predicted(out))),
                }
            )
        metrics: dict[str, Any] = {}
        for a in attributes:
            pairs = [(row["predicted"][a], row["scores"][a]) for row in rows if row["scores"][a] is not None]
            pairs = [(p, g) for p, g in pairs if not math.isnan(g)]
            metrics[f"{a}/mae"] = sum(abs(p - g) for p, g in pairs) / len(pairs) if pairs else None
            constant = len({g for _, g in pairs}) < 2 or len({p for p, _ in pairs}) < 2
            metrics[f"{a}/pearson"] = None if constant else float(pearsonr(*zip(*pairs)).statistic)
        path = rd.eval_dir / "validation.jsonl"
        res.write_jsonl(path, rows)
        results["validation"] = metrics_entry(rows, path, metrics, None)

    _score_model(rd, loaded_spec, results, validate, **kw)


def _reward_stats(rd: RunDir, results: dict[str, Any]) -> None:
    """Mean/std of rewards on the validation pairs (else the first benchmark) into the model config."""
    validation = results["validation"]
    pairs_entry = validation if validation and validation.get("kind") != METRICS else None
    source = "validation" if pairs_entry else next(iter(results["benchmarks"]), None)
    if source is None:
        return
    entry: dict[str, Any] = pairs_entry if pairs_entry is not None else results["benchmarks"][source]
    pairs = pairs_from_rows(entry["kind"], res.read_jsonl(Path(entry["per_example_path"])))
    stats = reward_normalization([p.chosen for p in pairs], [p.rejected for p in pairs])
    if (rd.model / "config.json").exists():
        save_reward_stats(rd.model, stats, source)
    results["reward_stats"] = {**stats, "source": source}
