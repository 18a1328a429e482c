"""What a sweep leaves besides its study: DIR/sweep.json (every trial), DIR/best.yaml (the best trial's full
spec, runnable on its own) and the parameter importances Optuna computes.

sweep.json is rewritten after every trial, so it is current while the sweep runs and after a kill.
"""

from __future__ import annotations

import glob
import io
from pathlib import Path
from typing import Any

import optuna

from rmspec.rundir import atomic_write_json, atomic_write_text, read_json
from rmspec.spec.sweep_rules import apply_values
from rmspec.sweep.noise import FEW_TRIALS, Z, binomial_stderr, within_noise
from rmspec.sweep.report import write_report
from rmspec.sweep.state import Sweep


def trial_record(trial: optuna.trial.FrozenTrial, metric: str | None = None) -> dict[str, Any]:
    attrs = trial.user_attrs
    stderr, stderr_source = _stderr(trial, metric)
    return {
        "number": trial.number,
        "state": trial.state.name.lower(),
        "params": trial.params,
        "values": attrs.get("values", {}),
        # Optuna gives a pruned trial its last reported value: that is the pruner's metric at a step, not the objective
        "objective": trial.value if trial.state == optuna.trial.TrialState.COMPLETE else None,
        "last_reported": {str(k): v for k, v in trial.intermediate_values.items()} or None,
        "stderr": stderr,
        "stderr_source": stderr_source,
        "seed_values": attrs.get("seed_values"),
        "pruned_at_step": attrs.get("pruned_at_step"),
        "error": attrs.get("error"),
        "seconds": attrs.get("seconds"),
        # rmspec plan's estimate of the trial's runs at its values (rmspec.sweep.budget), to check it against
        "estimated_seconds": attrs.get("estimated_seconds"),
        "estimate_ratio": _ratio(attrs.get("seconds"), attrs.get("estimated_seconds")),
        "devices": attrs.get("devices"),
        "worker": attrs.get("worker"),
        "adopted_by": attrs.get("adopted_by"),
        "slurm_jobs": attrs.get("slurm_jobs"),
        "run_dirs": attrs.get("run_dirs", []),
        "command": attrs.get("command"),
    }


def _stderr(trial: optuna.trial.FrozenTrial, metric: str | None) -> tuple[float | None, str | None]:
    """The objective's standard error: its seeds' (sweep.seeds), else a fraction's binomial error read from
    the run's results.json (rmspec.sweep.noise), else unknown."""
    if trial.user_attrs.get("stderr") is not None:
        return trial.user_attrs["stderr"], f"{len(trial.user_attrs.get('seed_values') or [])} seeds"
    runs = trial.user_attrs.get("run_dirs") or []
    if metric is None or trial.state != optuna.trial.TrialState.COMPLETE or len(runs) != 1:
        return None, None
    try:
        found = binomial_stderr(read_json(Path(runs[0]) / "results.json"), metric)
    except (OSError, ValueError):
        return None, None
    return found if found is not None else (None, None)


def _ratio(measured: float | None, estimated: float | None) -> float | None:
    """measured / estimated: above 1 the estimate was short."""
    return round(measured / estimated, 3) if measured and estimated else None


def best_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    try:
        return study.best_trial
    except ValueError:  # no completed trial yet
        return None


def importances(study: optuna.Study) -> dict[str, float] | str:
    """Optuna's parameter importances (its default evaluator, PED-ANOVA), or why there are none yet."""
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 2:
        return "fewer than 2 completed trials"
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            found = {k: float(v) for k, v in optuna.importance.get_param_importances(study).items()}
        except (RuntimeError, ValueError) as exc:  # e.g. every completed trial has the same value
            return f"not computed: {exc}"
    if any("importances will be equal" in str(w.message) for w in caught):
        return "not told apart: the best and the other trials do not differ enough (more trials needed)"
    return found


def write_sweep_json(sweep: Sweep) -> None:
    with sweep.guard:  # one writer at a time in this process: a later snapshot never loses to an earlier one
        record = read_json(sweep.dir.sweep_json)
        trials = sweep.study.get_trials(deepcopy=True)
        best = best_trial(sweep.study)
        record.update(
            {
                "objective": sweep.spec.objective.metric,
                "direction": sweep.spec.objective.direction,
                "seeds": sweep.spec.seeds,
                "parallel": sweep.spec.parallel,
                "trials": [trial_record(t, sweep.spec.objective.metric) for t in trials],
                "best": trial_record(best, sweep.spec.objective.metric) if best is not None else None,
            }
        )
        record["noise"] = noise_summary(record["best"], record["trials"])
        atomic_write_json(sweep.dir.sweep_json, record)


def noise_summary(best: dict[str, Any] | None, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the sweep tells its best trial from the rest: the completed trials within noise of the best,
    and the caveat when too few trials completed to trust a ranking or the importances."""
    complete = [t for t in trials if t.get("objective") is not None]
    close = within_noise(best, complete) if best else None
    return {
        "completed": len(complete),
        "within_noise_of_best": close,
        "z": Z,
        "few_trials": len(complete) < FEW_TRIALS,
    }


def finish(sweep: Sweep) -> None:
    """sweep.json with importances, best.yaml and report.html, at the end of a sweep (or of a resumed one)."""
    write_sweep_json(sweep)
    record = read_json(sweep.dir.sweep_json)
    record["importances"] = importances(sweep.study)
    atomic_write_json(sweep.dir.sweep_json, record)
    best = best_trial(sweep.study)
    if best is not None:
        write_best_yaml(sweep, best)
    write_report(sweep.dir, record)


def write_best_yaml(sweep: Sweep, best: optuna.trial.FrozenTrial) -> None:
    """The sweep's merged spec with the best trial's values and no sweep section. Relative paths that name
    files beside the sweep's spec are made absolute, so that the file runs from the sweep directory.
    With several seeds it carries the first (the trial's objective is their mean)."""
    from ruamel.yaml import YAML

    document = apply_values(sweep.loaded.document, best.user_attrs.get("values", {}))
    document.pop("extends", None)  # the merged document already holds what it named
    if sweep.spec.seeds:
        document.setdefault("training", {})["seed"] = sweep.spec.seeds[0]
    document = absolute_paths(document, sweep.loaded.base_dir)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    value = f"{best.value:.6g}" if best.value is not None else "-"
    out.write(
        f"# The best trial ({best.number}, {sweep.spec.objective.metric} = {value}) of the sweep in "
        f"{sweep.dir.root.resolve()}.\n# Run it with: rmspec run {sweep.dir.best_yaml}\n"
    )
    yaml.dump(document, out)
    atomic_write_text(sweep.dir.best_yaml, out.getvalue())


def absolute_paths(node: Any, base: Path) -> Any:
    """Strings that are relative paths (or glob patterns) naming something under `base` become absolute."""
    if isinstance(node, dict):
        return {k: absolute_paths(v, base) for k, v in node.items()}
    if isinstance(node, list):
        return [absolute_paths(v, base) for v in node]
    if isinstance(node, str) and node and not Path(node).is_absolute() and ("/" in node or "." in node):
        candidate = base / node
        if candidate.exists() or glob.glob(str(candidate)):
            return str(candidate.resolve()) if candidate.exists() else str(Path(base).resolve() / node)
    return node
