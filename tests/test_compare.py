"""`rmspec compare` on run directories written by hand (spec.yaml, results.json, status.json, metrics.jsonl):
the spec keys that differ and no other, the metrics as results.json holds them, mean ± standard error over
runs that differ only by seed (computed here by the formula), a sweep directory standing for its trials,
and a located refusal of a folder that is not a run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml

from helpers.runs import rmspec

BASE = {
    "version": 1,
    "name": "r",
    "model": {"name_or_path": "m"},
    "data": {"source": {"kind": "files", "paths": ["a.jsonl"]}, "filters": [{"kind": "drop_empty"}]},
    "approach": {"kind": "bradley_terry"},
    "training": {"learning_rate": 1e-4, "seed": 1, "max_steps": 10},
    "output": {"dir": "runs/r"},
}


def _run(root: Path, name: str, changes: dict, accuracy: float, bench: float, seconds: float, tokens: int) -> Path:
    run = root / name
    run.mkdir(parents=True)
    spec = json.loads(json.dumps(BASE))
    spec["name"], spec["output"]["dir"] = name, str(run)
    for path, value in changes.items():
        node = spec
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    entry = {"kind": "pairs", "overall": bench, "sections": {"easy": bench / 2}, "subsets": {}, "counts": {"x": 4}}
    results = {
        "schema_version": 1,
        "validation": {"overall": accuracy, "subsets": {"all": accuracy}, "counts": {"all": 10}},
        "benchmarks": {"pairs": entry},
    }
    (run / "results.json").write_text(json.dumps(results))
    status = {"state": "completed", "step": 10, "train_seconds": seconds}
    (run / "status.json").write_text(json.dumps(status))
    rows = [{"step": 5, "num_tokens": tokens // 2}, {"step": 10, "num_tokens": tokens}, {"step": 10, "eval/x": 1}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_compare_shows_differing_keys_metrics_and_seed_mean(tmp_path):
    a = _run(tmp_path, "a", {"training.seed": 1}, 0.70, 0.60, 12.5, 1000)
    b = _run(tmp_path, "b", {"training.seed": 2}, 0.80, 0.64, 13.0, 1000)
    c = _run(tmp_path, "c", {"training.seed": 3}, 0.78, 0.61, 11.0, 1000)
    d = _run(
        tmp_path, "d", {"training.learning_rate": 3e-4, "data.filters": [{"kind": "max_length"}]}, 0.5, 0.5, 9.0, 7
    )
    done = rmspec("compare", str(a), str(b), str(c), str(d), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["differences"] == [
        "data.filters.0.kind",
        "name",
        "output.dir",
        "training.learning_rate",
        "training.seed",
    ]
    by_run = {Path(r["run"]).name: r for r in found["runs"]}
    assert by_run["d"]["spec"]["training.learning_rate"] == 3e-4 and by_run["a"]["spec"]["training.seed"] == 1
    assert by_run["b"]["metrics"] == {
        "validation.overall": 0.80,
        "validation.subsets.all": 0.80,
        "benchmarks.pairs.overall": 0.64,
        "benchmarks.pairs.sections.easy": 0.32,
    }
    assert by_run["c"]["train_seconds"] == 11.0 and by_run["d"]["tokens"] == 7 and by_run["a"]["steps"] == 10
    (group,) = found["seed_groups"]  # a, b, c differ only by seed; d differs by more
    assert sorted(Path(r).name for r in group["runs"]) == ["a", "b", "c"]
    values = [0.70, 0.80, 0.78]
    mean = sum(values) / 3
    stderr = math.sqrt(sum((v - mean) ** 2 for v in values) / 2) / math.sqrt(3)
    shown = group["metrics"]["validation.overall"]
    assert math.isclose(shown["mean"], mean) and math.isclose(shown["stderr"], stderr) and shown["n"] == 3


def test_the_table_prints_the_values_and_the_seed_summary(tmp_path):
    a = _run(tmp_path, "a", {"training.seed": 1}, 0.70, 0.60, 12.5, 1000)
    b = _run(tmp_path, "b", {"training.seed": 2}, 0.80, 0.64, 13.0, 1000)
    done = rmspec("compare", str(a), str(b), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "0.7000" in done.stdout and "0.8000" in done.stdout and "12.5000" in done.stdout
    assert "0.7500 ± 0.0500" in done.stdout  # mean of 0.7 and 0.8, s.e. = 0.0707 / sqrt(2)


def test_a_sweep_directory_stands_for_its_trials(tmp_path):
    sweep = tmp_path / "sw"
    one = _run(sweep / "trials", "000", {"training.learning_rate": 1e-3}, 0.6, 0.5, 1.0, 10)
    two = _run(sweep / "trials", "001", {"training.learning_rate": 2e-3}, 0.7, 0.5, 1.0, 10)
    (sweep / "study.db").write_bytes(b"")
    record = {"trials": [{"run_dirs": [str(one)]}, {"run_dirs": [str(two)]}, {"run_dirs": [str(sweep / "gone")]}]}
    (sweep / "sweep.json").write_text(json.dumps(record))
    done = rmspec("compare", str(sweep), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r["run"] for r in json.loads(done.stdout)["runs"]] == [str(one), str(two)]


def test_a_folder_that_is_no_run_is_refused_with_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    done = rmspec("compare", str(tmp_path / "empty"), cwd=tmp_path)
    assert done.returncode == 2
    assert "neither a run directory" in done.stderr and "Traceback" not in done.stderr
