"""After training: final validation metrics, reward statistics, the final model and its card,
the evaluation hook, the hub upload, and the status."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rmspec import approaches
from rmspec.errors import RunError
from rmspec.plan import Plan
from rmspec.rundir import RunDir, write_status
from rmspec.train.callbacks import rename
from rmspec.train.final_model import model_card, reward_stats, save_final_model
from rmspec.vision.judge import card_use as judge_card_use
from rmspec.vision.models import card_use as vision_card_use


def final_metrics(trainer: Any, validation: Any, spec: Any, tokenizer: Any, main: bool) -> tuple[dict, dict]:
    """(metrics in the field's names, reward statistics) on the validation split, by the approach's
    `final_metrics` hook (rmspec.approaches)."""
    if validation is None:
        return {}, {}
    return approaches.of(spec).hook("final_metrics")(trainer, validation, spec, tokenizer, main)


def predicted_metrics(trainer: Any, validation: Any, spec: Any, tokenizer: Any, main: bool) -> tuple[dict, dict]:
    """A score model's final evaluation: the Trainer's metrics on the validation split, and the
    statistics of the reward it predicts there (none for a model whose outputs are not one reward)."""
    declared = approaches.of(spec)
    family = declared.metric_family
    prediction = trainer.predict(validation, metric_key_prefix="eval")
    metrics = dict(prediction.metrics)
    # Into metrics.jsonl and the trackers like any evaluation; model_step marks it as the final one and says
    # whose weights it scored (with final_model: best, not the step it is logged at).
    logged = {**metrics, "model_step": final_model_facts(spec, trainer)["step"]}
    trainer.log(logged)
    if "epoch" in logged:  # Trainer.log adds the epoch; status.json's final metrics have always carried it
        metrics["epoch"] = logged["epoch"]
    weights = declared.reward_weights(spec.approach)
    if weights is None:  # per-step probabilities (a PRM), not a reward to normalise
        return rename(metrics, family), {}
    rewards = np.asarray(prediction.predictions, dtype=np.float64)
    served = getattr(trainer, "served_rewards", None)  # extra heads (rmspec.train.heads): the saved reward's columns
    if served is not None:
        rewards = served(rewards)
    if weights:  # several outputs (one per attribute): the one reward is their weighted sum
        rewards = rewards.reshape(-1, len(weights)) @ np.array(weights)
    return rename(metrics, family), reward_stats(rewards)


def finish(
    run: RunDir, plan: Plan, loaded: Any, trainer: Any, tokenizer: Any, prepared: Any, validation: Any, main: bool
) -> int:
    spec = loaded.spec
    note = stage_notes(run) if main else (lambda message: None)
    if validation is not None:
        note(f"final evaluation: the validation split, {len(validation):,} rows")
    metrics, stats = final_metrics(trainer, validation, spec, tokenizer, main)
    report = prepared.report.to_json()
    extra = {
        "approach": spec.approach.kind,
        "spec_name": spec.name,
        "spec_hash": plan.spec_hash,
        "max_length": spec.training.max_length,
    }
    declared = approaches.of(spec)
    extra.update(declared.config_extra(spec))  # what a bare model folder needs to score as training did
    summary = {
        k: report.get(k)
        for k in ("rows_read", "rows_kept", "rejected", "splits", "length_heuristic_accuracy")
        if k in report
    }
    card = model_card(
        name=spec.name,
        approach=declared.name,
        scorer=declared.scorer.value,
        base_model=spec.model.name_or_path,
        weights=plan.weights,
        spec_yaml=run.spec.read_text(encoding="utf-8") if run.spec.exists() else "",
        data_summary=summary,
        results={k: v for k, v in metrics.items() if isinstance(v, (int, float))},
        use=(judge_card_use if declared.auto_model == "causal_lm" else vision_card_use)(
            getattr(trainer.accelerator.unwrap_model(trainer.model), "config", None)
        ),  # a VLM's Use section (a VLM judge's is its own); None: the scorer kind's
    )
    finalize = declared.hook("finalize")(spec) if declared.finalize else None
    note(f"saving the model to {run.model}")
    save_final_model(
        trainer, tokenizer, run.model, config_extra=extra, card=card, reward_stats=stats, finalize=finalize
    )
    if not main:
        return 0

    train_seconds = None
    for row in reversed(trainer.state.log_history):
        if "train_runtime" in row:
            train_seconds = row["train_runtime"]
            break
    result = {
        "step": trainer.state.global_step,
        "metrics": metrics,
        "reward_stats": stats,
        "train_seconds": train_seconds,
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "model_dir": str(run.model),
        "final_model": final_model_facts(spec, trainer),
        **batch_facts(trainer),
    }
    write_status(run, "evaluating", **result)
    evaluation = run_evaluation_hook(run, loaded, tokenizer, validation, progress=note)
    record_weights(run, plan.weights)
    push_error = None
    if spec.output.push_to_hub:
        try:
            push_to_hub(run, spec)
        except RunError as exc:
            push_error = exc.message + (f" ({exc.hint})" if exc.hint else "")
    write_status(run, "completed", finished=time.time(), evaluation=evaluation, push_error=push_error, **result)
    return 1 if push_error else 0


def record_weights(run: RunDir, weights: dict[str, Any] | None) -> None:
    """results.json says what the weights were when they were not a plain checkpoint (a dequantised GGUF)."""
    if weights is None or not run.results.exists():
        return
    from rmspec.rundir.results import read_results, write_results

    results = read_results(run.results)
    results["weights"] = weights
    if weights["note"] not in results.setdefault("notes", []):
        results["notes"].append(weights["note"])
    write_results(run.results, results)


def final_model_facts(spec: Any, trainer: Any) -> dict[str, Any]:
    """What RUN/model holds and why: the last step, or the checkpoint the selection metric scored best
    (the Trainer loaded it at the end; the final evaluation above ran on it)."""
    from rmspec.rundir import checkpoint_step
    from rmspec.spec.training import lower_is_better
    from rmspec.spec.training_rules import selection_metric

    metric = selection_metric(spec)
    best = trainer.state.best_model_checkpoint
    if metric is None or best is None or not trainer.args.load_best_model_at_end:
        return {"kind": "last", "step": trainer.state.global_step}
    step = checkpoint_step(best)
    lower = (
        lower_is_better(metric) if spec.training.early_stopping is None else spec.training.early_stopping.mode == "min"
    )
    return {
        "kind": "best",
        "step": step,
        "checkpoint": best,
        "metric": metric,
        "value": trainer.state.best_metric,
        "why": f"{metric} was {'lowest' if lower else 'highest'} ({trainer.state.best_metric:.6g}) at step {step} "
        f"of the evaluations every {trainer.args.eval_steps} steps",
    }


def batch_facts(trainer: Any) -> dict[str, Any]:
    """How the run actually batched and packed, to set against the plan."""
    args = trainer.args
    world = trainer.accelerator.num_processes
    packing, packing_reason = getattr(trainer, "packing", (None, None))  # rmspec.train.factory sets it
    return {
        "packing": packing,
        "packing_reason": packing_reason,
        "world_size": world,
        "micro_batch_size": args.per_device_train_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        # the context-parallel ranks of a group share their rows: the examples are the groups'
        "global_batch_size": args.per_device_train_batch_size
        * args.gradient_accumulation_steps
        * world
        // getattr(getattr(trainer, "context_parallel", None), "degree", 1),
        "max_steps": trainer.state.max_steps,
        "train_rows": len(trainer.train_dataset) if trainer.train_dataset is not None else 0,
    }


def stage_notes(run: RunDir) -> Callable[[str], None]:
    """What the run does after its last step (final evaluation, saving, benchmarks, the report), as
    `{"event": "stage", "message": ...}` rows in metrics.jsonl: the parent's live view prints them,
    so the minutes after training are not silent (rmspec.render.live_view)."""

    def note(message: str) -> None:
        with run.metrics.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": "stage", "message": message, "time": time.time()}) + "\n")

    return note


def run_evaluation_hook(
    run: RunDir, loaded: Any, tokenizer: Any, validation: Any, progress: Callable[[str], None] | None = None
) -> str:
    """The run-level evaluation (validation diagnostics, benchmarks, results.json, report):
    ``rmspec.evaluate.run_level.evaluate_run``; it loads the model from RUN/model, so the saved
    artifact is what gets scored. Returns what status.json records under `evaluation`."""
    from rmspec.evaluate.run_level import evaluate_run

    kwargs: dict[str, Any] = {"tokenizer": tokenizer, "progress": progress}
    if validation is not None:  # the split training held out, tokenized: scored again with the saved model
        kwargs["validation"] = validation
    evaluate_run(run.root, loaded, **kwargs)
    return "done"


def upload_command(run: RunDir, spec: Any) -> str:
    """The `hf upload` command (the CLI the pinned huggingface_hub installs) that uploads RUN/model by hand."""
    env = spec.output.hub_token_env
    return (
        f"hf upload {spec.output.hub_repo_id} {run.model}"
        + (" --private" if spec.output.private else "")
        + ("" if env == "HF_TOKEN" else f' --token "${env}"')
    )  # hf reads HF_TOKEN by itself


def push_to_hub(run: RunDir, spec: Any) -> None:
    """Upload RUN/model after everything is saved locally; errors say what to do and lose nothing."""
    token = os.environ.get(spec.output.hub_token_env)
    repo = spec.output.hub_repo_id
    if not token:
        raise RunError(
            f"push_to_hub: no token in ${spec.output.hub_token_env}; the model is saved in {run.model}",
            hint=f"export {spec.output.hub_token_env}=hf_... and upload with `{upload_command(run, spec)}`",
        )
    try:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        api.create_repo(repo, private=spec.output.private, exist_ok=True, repo_type="model")
        api.upload_folder(
            repo_id=repo, folder_path=str(run.model), repo_type="model", commit_message=f"rmspec run {spec.name}"
        )
    except Exception as exc:  # network, auth, offline mode: the local model stays as it is
        raise RunError(
            f"push_to_hub to {repo} failed: {type(exc).__name__}: {str(exc)[:300]}; the model is saved in {run.model}",
            hint=f"retry later with `{upload_command(run, spec)}`",
        ) from None
