"""Each tracker, read back with its own reader, holds metrics.jsonl's names and values at the same steps."""

from __future__ import annotations

import importlib.util

import pytest

import helpers.trackers as readers
from helpers import ci
from helpers.runs import make_run_spec, metrics_rows, rmspec
from rmspec.train.trackers import numeric

BACKENDS = ["tensorboard", "wandb", "mlflow", "swanlab", "trackio"]
MODULES = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "swanlab": "swanlab",
    "trackio": "trackio",
}


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    installed = [b for b in BACKENDS if importlib.util.find_spec(MODULES[b]) is not None]
    if not installed:
        ci.missing("no tracker package is installed (pip install -e '.[tracking]')")
    tmp = tmp_path_factory.mktemp("trackers")
    spec = make_run_spec(tmp, name="tracked", training="  max_steps: 6\n  eval_steps: 3")
    spec.write_text(spec.read_text() + f"tracking: {{backends: [{', '.join(installed)}]}}\n")
    done = rmspec("run", str(spec), cwd=tmp, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp / "runs" / "tracked"
    triples = [(k, row["step"], v) for row in metrics_rows(run) for k, v in numeric(row).items()]
    # A metric written twice at one step (peak_memory_gb on the last log and on the end summary):
    # SwanLab keeps the first value, the others the last.
    return run, {"last": readers.last_values(triples), "first": readers.last_values(triples[::-1])}, installed


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_tracker_holds_the_metrics_jsonl_values(tracked_run, backend):
    run, both, installed = tracked_run
    expected = both["first" if backend == "swanlab" else "last"]
    if backend not in installed:
        ci.missing(f"{backend} is not installed (pip install -e '.[tracking]')")
    got = getattr(readers, backend)(run)
    assert {"train/rm/loss", "eval/rm/accuracy", "episode", "num_tokens", "grad_norm"} <= {k for k, _ in expected}
    missing = sorted(set(expected) - set(got))
    assert not missing, f"{backend} lacks {missing[:5]}"
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-9), (backend, key)
    assert set(got) == set(expected)  # nothing under another name (transformers' integrations rename)
