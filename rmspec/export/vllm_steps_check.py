"""`rmspec export RUN --to vllm -o DIR --check` for a process reward model: vLLM's per-step rewards on the
exported folder against `rmspec score`'s `step_scores`, step by step.

One vLLM server starts on the folder, from the environment `--vllm-python` names, through the code `rmspec
serve --engine vllm` starts its engine with (rmspec.export.vllm_engine.attach), in the checked precision
(rmspec.export.check_dtype). The rows (rmspec.export.check_step_rows: the run's held-out split by default)
are scored two ways on it, each a form a user runs:
- `prm_client.py`: the folder's own client (its token ids and read points, /pooling token_classify);
- `rmspec serve --engine vllm`: rmspec's encoder (rmspec.inference.process.StepEngine) with vLLM as its
  engine (the same ids, VllmEngine.token_outputs);
and `rmspec score` (a subprocess: the command users run, float32, torch) scores the same rows. The largest
per-step difference is printed and written to RUN/export_vllm_check.json with the rows, the dtype and the
tolerance; above it the command exits 1. A row must also get as many step rewards from vLLM as from rmspec.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.export.check_dtype import Tolerance, choose, cpu_flags, engine_device, tolerance
from rmspec.export.check_step_rows import StepRows
from rmspec.export.vllm_hosting import Hosting
from rmspec.inference.engine_vllm import vllm_python

CLIENT_FORM = "prm_client.py (its token ids, /pooling token_classify)"
ENGINE_FORM = "rmspec serve --engine vllm (rmspec's token ids, token_classify)"


def start_rmspec_score(run: Path, rows: StepRows, work: Path) -> subprocess.Popen[str]:
    """`rmspec score RUN rows` for the process rows, started while vLLM starts."""
    path = work / "rows.jsonl"
    path.write_text("".join(json.dumps(row.score_row()) + "\n" for row in rows.rows))
    command = [sys.executable, "-m", "rmspec", "score", str(run), str(path), "--out", str(work / "scored.jsonl")]
    with (work / "score.log").open("w") as log:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)


def rmspec_step_scores(proc: subprocess.Popen[str], work: Path, rows: StepRows) -> list[list[float]]:
    """The `step_scores` of the finished `rmspec score`, in row order (a row it left out: no steps)."""
    if proc.wait() != 0:
        err = (work / "score.log").read_text(errors="replace")
        raise RmspecError(f"rmspec score failed on the check rows:\n{err[-1500:]}", "fix the run, then retry")
    scored = [json.loads(line) for line in (work / "scored.jsonl").read_text().splitlines()]
    by_id = {str(row["id"]): [float(v) for v in row["step_scores"]] for row in scored}
    return [by_id.get(row.id, []) for row in rows.rows]


def run_step_check(
    run: Path, folder: Path, host: Hosting, scorer: Any, python: str | None, rows: StepRows, dtype: str = "auto"
) -> dict[str, Any]:
    """Start vLLM on `folder`, score `rows` through the client and the serve engine, compare with `rmspec
    score`; the report (rmspec.export.vllm_check.write_report writes it)."""
    from rmspec.export.vllm_engine import attach
    from rmspec.export.vllm_steps import load_client

    python = vllm_python(python)
    device = engine_device(python)
    checked, why = choose(dtype, device, cpu_flags())
    items = [(row.prompt, row.steps) for row in rows.rows]
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="rmspec-vllm-check-") as tmp:
        work = Path(tmp)
        scoring = start_rmspec_score(run, rows, work)
        try:
            attach(scorer, folder, host.architecture, python, folder / "vllm_check.log", checked, log, "", device)
            expected = rmspec_step_scores(scoring, work, rows)
            client = load_client(folder)
            answers = client.step_rewards(items, url=scorer.backend.process.url, model=str(folder))
            got = {
                CLIENT_FORM: [list(a["step_scores"]) for a in answers],
                ENGINE_FORM: scorer.step_probabilities(items),
            }
        finally:
            if scoring.poll() is None:
                scoring.kill()
                scoring.wait()
            if scorer.backend is not None:
                scorer.backend.close()
                scorer.backend = None
    return {
        **step_verdict(expected, got, tolerance(checked), scorer.threshold),
        "dtype_reason": why,
        "engine_device": device,
        "reference": "rmspec score's step_scores in float32 (what rmspec evaluated)",
        **rows.report(),
        "rows_too_long": 0,  # never left out: rmspec, the client and the engine keep the same whole steps
        "vllm_python": python,
    }


def step_verdict(
    expected: list[list[float]], got: dict[str, list[list[float]]], tol: Tolerance, threshold: float = 0.5
) -> dict[str, Any]:
    """The largest |vLLM - rmspec score| over every step, per form; a row scored with another number of steps
    counts as an infinite difference. Passed when every form is within the tolerance."""
    flat = [v for row in expected for v in row]

    def largest(values: list[list[float]]) -> float:
        if [len(r) for r in values] != [len(r) for r in expected]:
            return float("inf")
        return max((abs(a - b) for r, e in zip(values, expected) for a, b in zip(r, e)), default=0.0)

    def first_error(scores: list[float]) -> int:
        return next((k for k, p in enumerate(scores) if p < threshold), -1)

    diffs = {form: largest(values) for form, values in got.items()}
    worst = max(diffs.values())
    bound = tol.bound(flat)
    same_first = {
        form: sum(first_error(r) == first_error(e) for r, e in zip(values, expected)) for form, values in got.items()
    }
    return {
        "dtype": tol.dtype,
        "tolerance": tol.value,
        "tolerance_relative": tol.relative,
        "reward_scale": tol.scale(flat),
        "allowed_difference": bound,
        "rule": tol.rule.replace("on every row", "on every step"),
        "max_abs_diff": worst,
        "passed": worst <= bound,
        "per_form": diffs,
        "not_supported_forms": {},
        "steps_compared": len(flat),
        "same_first_error": same_first,
        "rmspec_score": expected,
        "vllm": got,
    }
