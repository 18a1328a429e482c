"""The `sweep:` section without training: validate's located errors, rmspec run's refusal, the budget under
rmspec plan, the light path (no torch, no Optuna), one sweep per directory, and a combination that does not
plan becoming a failed trial that carries the error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.runs import rmspec

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "specs" / "quickstart.yaml"

DEMO = REPO / "rmspec" / "data" / "demo"
# extends: resolves the base's relative paths against this file's folder: the data is named absolutely
GOOD = """extends: {base}
data: {{source: {{kind: files, paths: [{demo}/preferences.jsonl]}}}}
eval: {{benchmarks: [{{kind: pairs, path: {demo}/benchmark_pairs.jsonl}}]}}
training: {{eval_steps: 20}}
sweep:
  space:
    training.learning_rate: {{kind: float, low: 1.0e-5, high: 1.0e-3, log: true}}
    training.warmup_ratio: {{kind: float, low: 0.0, high: 0.2, step: 0.05}}
    lengths: {{kind: group, choices: [{{training.max_length: 128}}, {{training.max_length: 256}}]}}
  objective: {{metric: benchmarks.benchmark_pairs.overall}}
  pruner: {{kind: median}}
  trials: 8
  seeds: [1, 2]
"""


# The quickstart's benchmark path is relative, and validate checks the benchmark file: name it absolutely.
BENCHMARK_NAMED = "extends: {base}\neval: {{benchmarks: [{{kind: pairs, path: {demo}/benchmark_pairs.jsonl}}]}}\n"


def _write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text.format(base=QUICKSTART, demo=DEMO))
    return path


def _sweep(body: str) -> str:
    """A sweep spec on the quickstart with `body` as its sweep section (indented by two)."""
    body = body.replace("{", "{{").replace("}", "}}")
    return BENCHMARK_NAMED + "sweep:\n" + "".join(f"  {line}\n" for line in body.strip().splitlines())


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "space: {training.learnig_rate: {kind: float, low: 0.001, high: 0.01}}\nobjective: {metric: validation.overall}",
            "training has no field 'learnig_rate' (did you mean 'learning_rate'?)",
        ),
        (
            "space: {output.dir: {kind: categorical, choices: [a, b]}}\nobjective: {metric: validation.overall}",
            "output.dir is set by rmspec sweep for each trial",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
            "objective: {metric: benchmarks.rewardbench.overall}",
            "no benchmark 'rewardbench' in eval.benchmarks (results.json will hold: benchmark_pairs)",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
            "objective: {metric: validation.overall}\npruner: {kind: median}",
            "pruning reads the validation metric logged during training",
        ),
        (
            "space: {training.global_batch_size: {kind: int, low: 0, high: 16}}\nobjective: {metric: validation.overall}",
            "with training.global_batch_size=0 the spec does not validate",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
            "objective: {metric: validation.overall}\nsampler: {kind: grid}",
            "the grid sampler needs a finite set of values",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
            "objective: {metric: validation.overall}\nfirst_trials: [{training.learning_rate: 0.5}]",
            "0.5 is outside [0.001, 0.01]",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.0, high: 0.01, log: true}}\n"
            "objective: {metric: validation.overall}",
            "a log scale needs low > 0",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
            "objective: {metric: validation.accuracy}",
            "an entry of results.json holds overall",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
            "objective: {metric: validation.overall}\nstorage: redis://host",
            "'redis://host' is not a storage: give sqlite, journal or an RDB URL",
        ),
        (
            "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
            "objective: {metric: validation.overall}\nslurm: {partition: 'a b'}",
            "'a b' must be one word",
        ),
    ],
)
def test_validate_locates_each_sweep_mistake(tmp_path, body, expected):
    spec = _write(tmp_path, _sweep(body))
    done = rmspec("validate", str(spec), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert expected in out, out
    assert f"{spec}:" in out and "Traceback" not in out


def test_a_good_sweep_validates_and_plan_shows_its_budget_without_torch_or_optuna(tmp_path):
    spec = _write(tmp_path, GOOD)
    code = (
        "import sys\n"
        "from rmspec.cli.main import cli\n"
        f"cli.main(['validate', {str(spec)!r}], standalone_mode=False)\n"
        f"cli.main(['plan', {str(spec)!r}], standalone_mode=False)\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'optuna', 'sqlalchemy') if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120, env=_env()
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout
    plan = json.loads(rmspec("plan", str(spec), "--set", "sweep=null", "--json", cwd=tmp_path).stdout)
    text = " ".join(done.stdout.split())
    assert "sweep budget: 8 trials x 2 seed(s) = 16 runs" in text
    per_run = _run_by_hand(plan)
    assert f"= {_time(16 * per_run)} of run time" in text, text
    # one trial at a time: the wall time is the run time
    assert "packing: 1 at once on this host's" in text and f"wall time about {_time(16 * per_run)}" in text
    assert "lengths choice 0" in text and "lengths choice 1" in text


def _run_by_hand(plan: dict) -> float:
    """One run of the GOOD spec from its plan: start, weights, steps, 11 validation passes (every 20 of 200
    steps and the final one) and the benchmark, each forward at a third of a step's cost per example."""
    from rmspec.sweep.budget import FORWARD_SHARE, LOAD_SECONDS_PER_GB, START_SECONDS

    estimate = plan["estimate"]
    steps = estimate["seconds_per_step"] * estimate["total_steps"]
    forward = estimate["seconds_per_step"] / plan["global_batch_size"] * FORWARD_SHARE
    passes = estimate["total_steps"] // 20 + 1
    validation = passes * (estimate["rows"] - estimate["train_rows"]) * forward
    bench_rows = len((DEMO / "benchmark_pairs.jsonl").read_text().strip().splitlines())
    load = plan["model"]["num_parameters"] * 4 / 1e9 * LOAD_SECONDS_PER_GB
    return START_SECONDS + load + steps + validation + bench_rows * forward


def _time(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else f"{seconds / 60:.1f} min"
        if seconds < 7200
        else f"{seconds / 3600:.1f} h"
    )


def test_plan_packs_parallel_trials_and_prices_the_wall_time(tmp_path):
    """parallel 2 on a CPU host: two trials at once, each on half the cores; the steps' compute stretches by
    the share of cores, the fixed costs overlap: wall = ceil(8 / 2) x 2 seeds x (run + steps x (2 - 1))."""
    import os

    spec = _write(tmp_path, GOOD.replace("seeds: [1, 2]", "seeds: [1, 2]\n  parallel: 2"))
    done = rmspec("plan", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(rmspec("plan", str(spec), "--set", "sweep=null", "--json", cwd=tmp_path).stdout)
    per_run = _run_by_hand(plan)
    steps = plan["estimate"]["seconds_per_step"] * plan["estimate"]["total_steps"]
    cores = len(os.sched_getaffinity(0))
    share = min(2, cores)
    text = " ".join(done.stdout.split())
    assert f"packing: 2 at once on this host's {cores} cores, {max(1, cores // 2)} each" in text, text
    assert f"wall time about {_time(4 * 2 * (per_run + steps * (share - 1)))}" in text


def test_join_on_sqlite_storage_is_refused_naming_the_storage_to_write(tmp_path):
    need("optuna")
    spec = _write(tmp_path, GOOD)
    done = rmspec("sweep", str(spec), "-o", "sw", "--join", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "sweep.storage sqlite is for one process only" in done.stderr and "--set sweep.storage=journal" in done.stderr
    )
    assert "Traceback" not in done.stderr and not (tmp_path / "sw").exists()


def _env() -> dict:
    import os

    return {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "200"}


def test_run_refuses_a_sweep_spec_naming_rmspec_sweep(tmp_path):
    spec = _write(tmp_path, GOOD)
    done = rmspec("run", str(spec), cwd=tmp_path)
    assert done.returncode == 2
    assert f"rmspec sweep {spec}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_two_sweeps_on_one_directory_are_refused(tmp_path):
    need("optuna")
    from rmspec.rundir.lock import claim_lock

    spec = _write(tmp_path, GOOD)
    lock = claim_lock(tmp_path / "sw", "rmspec sweep")  # another sweep holds the directory
    try:
        done = rmspec("sweep", str(spec), "-o", "sw", cwd=tmp_path)
    finally:
        lock.release()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "in use by rmspec sweep pid" in done.stderr and "one sweep directory" in done.stderr
    (tmp_path / "sw" / "study.db").write_bytes(b"")  # a sweep already there, not --resume
    again = rmspec("sweep", str(spec), "-o", "sw", cwd=tmp_path)
    assert again.returncode == 2 and "rmspec sweep --resume sw" in again.stderr


# Every value validates (validate checks each alone and the first trials), but the first trial's micro batch
# of 4096 sequences of 512 tokens does not fit in 2 GB: the plan refuses it, as a run would.
COMBINATION = (
    BENCHMARK_NAMED
    + """training: {{global_batch_size: 4096}}
hardware: {{cpu_memory_gb: 2}}
sweep:
  space:
    training.micro_batch_size: {{kind: categorical, choices: [auto, 4096]}}
    training.max_length: {{kind: categorical, choices: [128, 512]}}
  objective: {{metric: validation.overall}}
  first_trials: [{{training.micro_batch_size: 4096, training.max_length: 512}}]
  trials: 1
"""
)


def test_a_combination_that_does_not_plan_is_a_failed_trial_carrying_the_error(tmp_path):
    optuna = need("optuna")
    spec = _write(tmp_path, COMBINATION)
    assert rmspec("validate", str(spec), cwd=tmp_path).returncode == 0
    done = rmspec("sweep", str(spec), "-o", "sw", cwd=tmp_path)
    assert done.returncode == 1 and "no trial completed" in done.stderr, done.stdout + done.stderr
    record = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    (trial,) = record["trials"]
    assert trial["state"] == "fail"
    assert "nothing fits" in trial["error"] and "micro batch 4096" in trial["error"]
    assert not (tmp_path / "sw" / "trials" / "000").exists()  # refused before any run directory
    study = optuna.load_study(study_name="quickstart", storage=f"sqlite:///{tmp_path / 'sw' / 'study.db'}")
    assert study.trials[0].state == optuna.trial.TrialState.FAIL


def test_sweep_refuses_an_approach_metric_the_approach_does_not_write(tmp_path):
    need("optuna")
    body = (
        "space: {training.learning_rate: {kind: float, low: 0.001, high: 0.01}}\n"
        "objective: {metric: validation.metrics.acuracy}"
    )
    spec = _write(tmp_path, _sweep(body))
    assert rmspec("validate", str(spec), cwd=tmp_path).returncode == 0  # names are the registry's, read by sweep
    done = rmspec("sweep", str(spec), "-o", "sw", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "validation writes metrics accuracy" in done.stderr and "validation.metrics.accuracy" in done.stderr
    assert not (tmp_path / "sw").exists()
