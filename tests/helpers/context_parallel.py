"""Shared by the context-parallel run tests: the spec of a tiny run split over its processes, and a run's final
evaluation against one process's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.runs import make_run_spec

TIMING = ("runtime", "per_second")


def split_spec(
    tmp: Path, name: str, procs: int, model: Path, training: str, edits: dict[str, str] | None = None
) -> Path:
    """helpers.runs' tiny run (60 pairs, batches of 4, learning rate 0.1) on ``procs`` processes, all one
    context-parallel group where there are 2 or more; ``edits`` replace text in the spec as written."""
    spec = make_run_spec(tmp, name=name, training=training, batch=4, procs=procs, rows=60, model=model)
    text = spec.read_text().replace("learning_rate: 3.0e-3", "learning_rate: 0.1")
    if procs > 1:
        text = text.replace(f"gpus_per_node: {procs}}}", f"gpus_per_node: {procs}, context_parallel: {procs}}}")
    for old, new in (edits or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    spec.write_text(text)
    return spec


def final_evaluation(run: Path) -> dict[str, float]:
    """The final evaluation's figures (status.json), timings left out."""
    metrics = json.loads((run / "status.json").read_text())["metrics"]
    return {k: v for k, v in metrics.items() if k.startswith("eval/") and not k.endswith(TIMING)}


def assert_pairs_evaluated_as_one_process(run: Path, reference: Path, rel: float = 1e-5) -> None:
    """``run``'s final evaluation (split over its groups) gives ``reference``'s figures (one process, the same rows,
    weights equal to float noise: ``rel``), and its mean rewards are the one-process scoring of ``run``'s own saved
    model (rmspec.evaluate's per-pair rewards, eval/validation.jsonl) to 1e-6: each row counted once, no repeat
    counted (a repeat counted shifts the means of 12 rows by far more; tests/test_context_parallel_eval.py also
    counts the rows compute_metrics gets, since every row counted twice would leave the means as they are)."""
    want, got = final_evaluation(reference), final_evaluation(run)
    assert {"eval/rm/loss", "eval/rm/accuracy"} <= set(want) and sorted(got) == sorted(want), (want, got)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=rel, abs=1e-6), key
    scored = [json.loads(line) for line in (run / "eval" / "validation.jsonl").read_text().splitlines()]
    for side in ("chosen", "rejected"):
        mean = sum(row[f"score_{side}"] for row in scored) / len(scored)
        assert got[f"eval/rm/{side}_rewards"] == pytest.approx(mean, abs=1e-6), side
