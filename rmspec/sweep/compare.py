"""`rmspec compare`: runs side by side. Only the spec keys that differ, the validation and benchmark
metrics of results.json, training time and tokens; mean ± standard error over runs that differ only by
seed. Light: reads each run's spec.yaml, results.json, status.json and metrics.jsonl (no Optuna, no torch).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.rundir import RunDir, read_json, read_status
from rmspec.sweep.layout import SweepDir
from rmspec.sweep.objective import numbers_under

# Keys that differ between any two runs by construction: they name the run, not what it learned.
NAMING_KEYS = ("name", "output.dir")
SEED_KEY = "training.seed"


@dataclass
class RunFacts:
    path: Path
    spec: dict[str, Any]  # the spec as run, flattened to dotted keys
    metrics: dict[str, float]  # results.json: validation.* and benchmarks.NAME.* numbers
    train_seconds: float | None
    tokens: int | None
    steps: int | None
    state: str | None


def runs_of(targets: list[str]) -> list[Path]:
    """Each target is a run directory, or a sweep directory standing for all its trials' runs."""
    runs: list[Path] = []
    for target in targets:
        path = Path(target)
        if SweepDir(path).is_sweep():
            record = read_json(SweepDir(path).sweep_json)
            found = [Path(d) for t in record.get("trials", []) for d in t.get("run_dirs", [])]
            runs += [d for d in found if RunDir(d).spec.exists()]
        elif RunDir(path).spec.exists():
            runs.append(path)
        else:
            raise RmspecError(
                f"{target} is neither a run directory (no spec.yaml) nor a sweep directory (no study.db)",
                hint="give directories written by rmspec run or rmspec sweep",
            )
    if not runs:
        raise RmspecError("no run to compare", hint="give run or sweep directories that hold finished runs")
    return runs


def facts_of(path: Path) -> RunFacts:
    from ruamel.yaml import YAML

    run = RunDir(path)
    document = YAML(typ="safe", pure=True).load(run.spec.read_text(encoding="utf-8")) or {}
    results = read_json(run.results)
    picked = {k: results[k] for k in ("validation", "benchmarks") if isinstance(results.get(k), Mapping)}
    status = read_status(run)
    return RunFacts(
        path=path,
        spec=flatten(document),
        metrics={k: v for k, v in numbers_under(picked).items() if _is_metric(k)},
        train_seconds=status.train_seconds,
        tokens=_last_tokens(run),
        steps=status.step,
        state=status.state,
    )


def _is_metric(key: str) -> bool:
    """overall, sections and subsets of each entry (the figures a reader compares), not counts or details."""
    parts = key.split(".")
    entry = parts[1:] if parts[0] == "validation" else parts[2:]
    return bool(entry) and (entry[0] == "overall" or (entry[0] in ("sections", "subsets") and len(entry) == 2))


def _last_tokens(run: RunDir) -> int | None:
    """The trainer's count of input tokens seen (metrics.jsonl num_tokens, cumulative)."""
    if not run.metrics.exists():
        return None
    tokens = None
    for line in run.metrics.read_text(encoding="utf-8").splitlines():
        try:
            value = json.loads(line).get("num_tokens")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, (int, float)):
            tokens = int(value)
    return tokens


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: {}}
    if isinstance(node, list) and any(isinstance(v, (Mapping, list)) for v in node):
        out = {}
        for i, value in enumerate(node):
            out.update(flatten(value, f"{prefix}{i}."))
        return out
    return {prefix[:-1]: node}


def differing_keys(runs: list[RunFacts]) -> list[str]:
    keys = sorted({k for r in runs for k in r.spec})
    # null and absent both leave the default (a trial's spec as run says sweep: null), so they are equal here
    return [k for k in keys if len({json.dumps(r.spec.get(k), default=str) for r in runs}) > 1]


def seed_groups(runs: list[RunFacts], differing: list[str]) -> list[list[RunFacts]]:
    """Runs whose specs differ only by training.seed (and their names and directories), two or more each."""
    groups: dict[str, list[RunFacts]] = {}
    for run in runs:
        key = json.dumps({k: run.spec.get(k) for k in differing if k not in (*NAMING_KEYS, SEED_KEY)}, default=str)
        groups.setdefault(key, []).append(run)
    return [g for g in groups.values() if len(g) > 1 and len({r.spec.get(SEED_KEY) for r in g}) == len(g)]


def mean_stderr(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) / math.sqrt(len(values))


def comparison(targets: list[str]) -> dict[str, Any]:
    """Everything `rmspec compare` shows, as the JSON its --json prints."""
    runs = [facts_of(p) for p in runs_of(targets)]
    differing = differing_keys(runs)
    metric_keys = sorted({k for r in runs for k in r.metrics})
    groups = []
    for group in seed_groups(runs, differing):
        summary = {}
        for key in metric_keys:
            values = [r.metrics[key] for r in group if key in r.metrics]
            if len(values) > 1:
                mean, stderr = mean_stderr(values)
                summary[key] = {"mean": mean, "stderr": stderr, "n": len(values)}
        groups.append({"runs": [str(r.path) for r in group], "metrics": summary})
    return {
        "differences": differing,
        "runs": [
            {
                "run": str(r.path),
                "state": r.state,
                "spec": {k: r.spec.get(k) for k in differing},
                "metrics": r.metrics,
                "train_seconds": r.train_seconds,
                "tokens": r.tokens,
                "steps": r.steps,
            }
            for r in runs
        ],
        "seed_groups": groups,
    }
