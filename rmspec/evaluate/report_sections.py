"""The report's sections a reward-model engineer reads first: how the run was trained (hyperparameters),
how fast (wall time, pairs/s, tokens/s), whether validation was followed over training, and which
held-out pairs the model gets most wrong (the largest negative margins, with their prompts, per subset).

Each reads the run directory only (spec.yaml as run, plan.json, status.json, metrics.jsonl, the
per-example rows of eval/), so `rmspec report RUN` rebuilds them without torch.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.evaluate.html_parts import esc, kv_table, pct, table
from rmspec.evaluate.report_entries import per_example_file
from rmspec.evaluate.results import read_jsonl

WORST_SHOWN = 5  # misranked pairs per subset
PROMPT_SHOWN = 300  # characters of a prompt in the table (the row keeps up to rmspec.evaluate.excerpts.LIMIT)


def _training_settings(run_dir: Path) -> dict[str, Any]:
    """The training section as run, defaults filled in (the typed spec), or as written when it no longer loads."""
    try:
        from rmspec.rundir import load_run_spec

        training = load_run_spec(run_dir).spec.training
        return training.model_dump(mode="json")
    except Exception:  # an old or hand-edited run: what spec.yaml says, without defaults
        try:
            from rmspec.spec.yaml_io import read_yaml_file

            doc, _ = read_yaml_file(Path(run_dir) / "spec.yaml")
            return dict((doc or {}).get("training") or {})
        except Exception:
            return {}


def hyperparameters(run_dir: Path, plan: Mapping[str, Any] | None, status: Mapping[str, Any]) -> str:
    """Learning rate and schedule, length of training, batch, precision and strategy, in one table."""
    t = _training_settings(run_dir)
    plan = plan or {}
    shown: dict[str, Any] = {}
    for key in ("learning_rate", "lr_scheduler", "min_learning_rate", "decay_ratio", "warmup_ratio", "optimizer"):
        if t.get(key) is not None:
            shown[key] = t[key]
    if t.get("weight_decay") is not None:
        shown["weight_decay"] = t["weight_decay"]
    if t.get("max_steps"):
        shown["length"] = f"max_steps {t['max_steps']}"
    elif t.get("epochs") is not None:
        shown["length"] = f"epochs {t['epochs']}"
    if status.get("max_steps"):
        shown["optimizer steps"] = status["max_steps"]
    for key in ("global_batch_size", "micro_batch_size", "gradient_accumulation_steps", "num_processes"):
        value = plan.get(key, status.get(key))
        if value is not None:
            shown[key] = value
    for key in ("max_length", "seed", "max_grad_norm"):
        if t.get(key) is not None:
            shown[key] = t[key]
    for key in ("precision", "strategy", "gradient_checkpointing", "packing"):
        if plan.get(key) is not None:
            shown[key] = plan[key]
    if plan.get("strategy_reason"):
        shown["strategy_reason"] = plan["strategy_reason"]
    if not shown:
        return "<p class=muted>spec.yaml and plan.json not found.</p>"
    return kv_table(shown)


def throughput(status: Mapping[str, Any], metrics: Sequence[Mapping[str, Any]]) -> str:
    """Wall time of the run and of training, pairs and tokens per second of training."""
    rows: list[tuple[str, str]] = []
    started, finished = status.get("started"), status.get("finished")
    if started and finished:
        rows.append(("wall time (start to end, evaluation included)", _clock(float(finished) - float(started))))
    elif started:  # the end-of-run evaluation writes this report before the run is marked finished
        rows.append(("wall time to this report (training and evaluation)", _clock(time.time() - float(started))))
    seconds = status.get("train_seconds")
    steps = status.get("step")
    batch = status.get("global_batch_size")
    if seconds:
        rows.append(("training time", _clock(float(seconds))))
        if steps and batch:
            pairs = int(steps) * int(batch)
            rows.append(("pairs trained on (steps x global batch)", f"{pairs:,}"))
            rows.append(("pairs per second", f"{pairs / float(seconds):,.1f}"))
        tokens = max(
            (int(r["num_tokens"]) for r in metrics if isinstance(r.get("num_tokens"), (int, float))), default=0
        )
        if tokens:
            rows.append(("tokens seen (padding excluded)", f"{tokens:,}"))
            rows.append(("tokens per second", f"{tokens / float(seconds):,.0f}"))
    peak = max((float(r["peak_memory_gb"]) for r in metrics if r.get("peak_memory_gb") is not None), default=None)
    if peak is not None:
        rows.append(("peak memory per process", f"{peak:.2f} GiB"))
    if not rows:
        return "<p class=muted>status.json has no timings (the run did not finish).</p>"
    return table(("", "value"), rows, numeric=(1,))


def validation_curve_note(metrics: Sequence[Mapping[str, Any]], family: str = "rm") -> str:
    """Whether the curves above follow validation over training, and how to get them when not."""
    steps = sorted(
        {int(r["step"]) for r in metrics if r.get(f"eval/{family}/accuracy") is not None and "model_step" not in r}
    )
    if len(steps) >= 2:
        return (
            f"<p class=muted>validation evaluated at {len(steps)} steps ({steps[0]} to {steps[-1]}), drawn above.</p>"
        )
    return (
        "<p class=note>validation was evaluated only at the end of training, so there is no validation "
        "curve: set <code>training.eval_steps</code> (e.g. <code>--set training.eval_steps=20</code>) to evaluate "
        "the held-out pairs every so many steps.</p>"
    )


def worst_pairs(run_dir: Path, entries: Mapping[str, Mapping[str, Any]]) -> str:
    """Per evaluation and subset: the misranked pairs with the largest negative margins, with their prompts."""
    parts = []
    for name, entry in entries.items():
        path = per_example_file(Path(run_dir), entry)  # also after the run directory moved
        if path is None:
            continue
        rows = [r for r in read_jsonl(path) if _is_pair(r)]
        if not rows:
            continue
        by_subset: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for row in rows:
            by_subset[str(row.get("subset") or "all")].append(row)
        parts.append(f"<h3>{esc(name)}</h3>")
        for subset, group in sorted(by_subset.items()):
            wrong = sorted(
                (r for r in group if _margin(r) < 0),
                key=_margin,
            )
            accuracy = 1 - len(wrong) / len(group)
            head = f"<h4>{esc(subset)}: {pct(accuracy)} of {len(group):,} pairs ranked right, {len(wrong):,} misranked</h4>"
            if not wrong:
                parts.append(head)
                continue
            shown = [
                (
                    r.get("id", ""),
                    f"{_margin(r):.3f}",
                    f"{float(r['score_chosen']):.3f}",
                    f"{float(r['score_rejected']):.3f}",
                    _prompt(r),
                )
                for r in wrong[:WORST_SHOWN]
            ]
            parts.append(head + table(("id", "margin", "chosen", "rejected", "prompt"), shown, numeric=(1, 2, 3)))
    if not parts:
        return "<p class=muted>no per-example pair rows (eval/*.jsonl) to rank.</p>"
    return (
        "<p class=muted>margin = reward(chosen) - reward(rejected); the most negative first, "
        f"{WORST_SHOWN} per subset; every row is in the evaluation's per-example file.</p>" + "\n".join(parts)
    )


def _is_pair(row: Mapping[str, Any]) -> bool:
    return isinstance(row.get("score_chosen"), (int, float)) and isinstance(row.get("score_rejected"), (int, float))


def _margin(row: Mapping[str, Any]) -> float:
    return float(row["score_chosen"]) - float(row["score_rejected"])


def _prompt(row: Mapping[str, Any]) -> str:
    text = str(row.get("prompt") or "")
    if not text:
        return "(not recorded: rows written before the prompt was kept; rmspec eval RUN writes them again)"
    return text if len(text) <= PROMPT_SHOWN else text[: PROMPT_SHOWN - 1] + "…"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else (f"{m} min {s:02d} s" if m else f"{s} s")
