"""DIR/report.html of a sweep: the objective by trial, each parameter against the objective, the
parameter importances, and the table of trials. Figures are matplotlib PNGs embedded as base64 (the run
report's way, rmspec.evaluate.report_plots); without matplotlib the tables stand alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rmspec.evaluate.html_parts import esc, img, table
from rmspec.evaluate.report import CSS
from rmspec.rundir import atomic_write_text
from rmspec.sweep.layout import SweepDir
from rmspec.sweep.noise import FEW_TRIALS

STATE_COLOURS = {"complete": "#1c7ed6", "pruned": "#f08c00", "fail": "#c92a2a"}


def write_report(folder: SweepDir, record: Mapping[str, Any]) -> None:
    trials = record.get("trials") or []
    metric = record.get("objective", "objective")
    parts = [f"<h1>sweep {esc(record.get('study_name', ''))}</h1>", _summary(record)]
    parts.append("<h2>objective by trial</h2>" + img(_by_trial(trials, metric), "objective by trial"))
    keys = sorted({k for t in trials for k in t.get("params", {})})
    if keys:
        parts.append("<h2>parameters against the objective</h2>")
        parts += [img(_against(trials, key, metric), f"{key} against the objective") for key in keys]
    importances = record.get("importances")
    parts.append("<h2>parameter importances (Optuna's PED-ANOVA)</h2>")
    completed = (record.get("noise") or {}).get("completed", 0)
    if isinstance(importances, Mapping) and importances and completed < FEW_TRIALS:
        parts.append(
            f"<p><b>From {completed} completed trial{'s' if completed != 1 else ''} only:</b> importances from so "
            f"few trials are a hint, not a measurement; they can change completely with the next trials "
            f"(at least {FEW_TRIALS} completed trials before reading them).</p>"
        )
    if isinstance(importances, Mapping) and importances:
        parts.append(img(_bars(importances), "importances"))
        parts.append(table(("parameter", "importance"), [(k, f"{v:.3f}") for k, v in importances.items()], (1,)))
    else:
        parts.append(f"<p>{esc(importances or 'none')}</p>")
    parts.append("<h2>trials</h2>" + _trials_table(trials))
    html = (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>rmspec sweep: {esc(record.get('study_name', ''))}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )
    atomic_write_text(folder.report_html, html)


def _summary(record: Mapping[str, Any]) -> str:
    best = record.get("best") or {}
    rows = [
        ("objective", f"{record.get('objective')} ({record.get('direction')})"),
        ("trials", len(record.get("trials") or [])),
        ("best trial", best.get("number", "-")),
        ("best value", _fmt(best.get("objective")) + _error(best)),
        ("told apart?", noise_sentence(record)),
        ("best values", ", ".join(f"{k}={v}" for k, v in (best.get("values") or {}).items())),
        ("study", f"{record.get('storage')} (study {record.get('study_name')})"),
    ]
    return table(("", ""), rows)


def _error(trial: Mapping[str, Any]) -> str:
    if trial.get("stderr") is None:
        return ""
    return f" ± {trial['stderr']:.4g} (standard error: {trial.get('stderr_source') or 'seeds'})"


def noise_sentence(record: Mapping[str, Any]) -> str:
    """Whether the best trial stands out from the others by more than their noise, in words."""
    noise = record.get("noise") or {}
    completed = noise.get("completed", 0)
    close = noise.get("within_noise_of_best")
    few = f" Only {completed} trials completed: the ranking is a hint." if noise.get("few_trials") else ""
    if completed < 2:
        return "fewer than 2 completed trials: nothing to compare." + few
    if close is None:
        return "unknown: the objective's standard error is not known (give sweep.seeds to measure it)." + few
    if close:
        shown = ", ".join(map(str, close))
        return (
            f"no: trial{'s' if len(close) > 1 else ''} {shown} {'are' if len(close) > 1 else 'is'} within "
            f"{noise.get('z', 2):g} standard errors of the best; the sweep does not tell them apart." + few
        )
    return f"yes: every other completed trial is more than {noise.get('z', 2):g} standard errors away." + few


def _trials_table(trials: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        (
            t["number"],
            t["state"],
            ", ".join(f"{k}={_fmt(v)}" for k, v in t.get("params", {}).items()),
            _fmt(t.get("objective")),
            _fmt(t.get("stderr")),
            t.get("pruned_at_step") or "",
            t.get("seconds") or "",
            t.get("estimated_seconds") or "",
            (t.get("error") or "").strip().splitlines()[-1:][0] if t.get("error") else "",
        )
        for t in trials
    ]
    return table(
        ("trial", "state", "parameters", "objective", "± s.e.", "pruned at", "seconds", "estimated s", "error"),
        rows,
        (0, 3),
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _figure():
    try:
        from rmspec.evaluate.report_plots import _figure as figure
    except ImportError:  # pragma: no cover - matplotlib is the report extra
        return None
    try:
        return figure()
    except ImportError:
        return None


def _png(fig: Any) -> str:
    from rmspec.evaluate.report_plots import _png as png

    return png(fig)


def _points(trials: Sequence[Mapping[str, Any]], key: str | None) -> dict[str, list[tuple[Any, float]]]:
    """state -> [(x, objective)]: pruned trials at their last reported value are left out (no objective)."""
    out: dict[str, list[tuple[Any, float]]] = {}
    for t in trials:
        if t.get("objective") is None:
            continue
        x = t["number"] if key is None else t.get("params", {}).get(key)
        out.setdefault(t["state"], []).append((x, t["objective"]))
    return out


def _by_trial(trials: Sequence[Mapping[str, Any]], metric: str) -> str | None:
    pruned = [t["number"] for t in trials if t["state"] == "pruned"]
    return _scatter(trials, None, metric, "trial (pruned: orange lines)", pruned)


def _against(trials: Sequence[Mapping[str, Any]], key: str, metric: str) -> str | None:
    return _scatter(trials, key, metric, key, [])


def _scatter(
    trials: Sequence[Mapping[str, Any]], key: str | None, metric: str, xlabel: str, lines: Sequence[int]
) -> str | None:
    """The objective against the trial number (key None) or a parameter, one colour per state."""
    made = _figure()
    if made is None:
        return None
    fig, ax = made
    for state, points in _points(trials, key).items():
        ax.scatter(*zip(*points, strict=True), label=state, color=STATE_COLOURS.get(state))
    for number in lines:
        ax.axvline(number, color=STATE_COLOURS["pruned"], alpha=0.3)
    values = [t.get("params", {}).get(key) for t in trials] if key else []
    if values and all(isinstance(v, (int, float)) and v > 0 for v in values) and max(values) / min(values) > 50:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric)
    return _png(fig)


def _bars(importances: Mapping[str, float]) -> str | None:
    made = _figure()
    if made is None:
        return None
    fig, ax = made
    names = list(importances)
    ax.barh(names, [importances[n] for n in names], color="#1c7ed6")
    ax.invert_yaxis()
    ax.set_xlabel("importance")
    return _png(fig)
