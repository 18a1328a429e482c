"""The report's plots: matplotlib's object API (no pyplot state, no display), each figure a PNG as base64."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

CHOSEN_COLOUR, REJECTED_COLOUR = "#2b8a3e", "#c92a2a"
CURVE_KEYS = {
    "loss": ("train/rm/loss", "eval/rm/loss"),
    "accuracy": ("train/rm/accuracy", "eval/rm/accuracy"),
    "learning rate": ("train/rm/lr", "train/sft/lr"),  # the schedule as it ran (warmup, decay)
}
# Drawn on a second axis of a plot: the gradient norm (before clipping, as Trainer logs it) beside the loss.
SECOND_AXIS = {"loss": ("grad_norm",)}


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float = 5.2, height: float = 3.4):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.subplots()


def curve_series(metrics: Sequence[Mapping[str, Any]], what: str) -> dict[str, list[tuple[int, float]]]:
    """{metrics.jsonl key: [(step, value)]} for one training plot. The final evaluation is drawn at the
    step whose weights it scored (model_step: with final_model best, the selected checkpoint's)."""
    series = {}
    for key in (*CURVE_KEYS[what], *SECOND_AXIS.get(what, ())):
        points = [
            (r.get("model_step", r["step"]), r[key])
            for r in metrics
            if r.get(key) is not None and r.get("step") is not None
        ]
        if points:
            series[key] = points
    return series


def curve_plot(metrics: Sequence[Mapping[str, Any]], what: str) -> str | None:
    series = curve_series(metrics, what)
    if not series:
        return None
    fig, ax = _figure()
    second = ax.twinx() if any(k in series for k in SECOND_AXIS.get(what, ())) else None
    for key, points in series.items():
        steps, values = zip(*points)
        on = second if second is not None and key in SECOND_AXIS[what] else ax
        on.plot(
            steps,
            values,
            marker="o" if len(points) < 30 else None,
            markersize=3,
            label=key,
            **({"color": "#868e96", "linestyle": "--"} if on is second else {}),
        )
    ax.set_xlabel("step")
    ax.set_ylabel(what)
    ax.set_title(f"{what} during training" + (" (gradient norm on the right)" if second is not None else ""))
    ax.grid(alpha=0.3)
    handles = [h for a in (ax, second) if a is not None for h in a.get_legend_handles_labels()[0]]
    ax.legend(handles=handles)
    if second is not None:
        second.set_ylabel("gradient norm (before clipping)")
    return _png(fig)


def histogram_plot(name: str, chosen: Sequence[float], rejected: Sequence[float]) -> str:
    low, high = min(*chosen, *rejected), max(*chosen, *rejected)
    bins = [low + (high - low) * i / 30 for i in range(31)] if high > low else 10
    return _two_histograms(
        bins,
        (f"chosen (n={len(chosen)})", chosen),
        (f"rejected (n={len(rejected)})", rejected),
        "reward",
        "responses",
        f"{name}: rewards of chosen vs rejected",
    )


def step_score_plot(name: str, correct: Sequence[float], wrong: Sequence[float]) -> str:
    """A PRM's P(correct) for steps known correct and steps known wrong."""
    return _two_histograms(
        [i / 20 for i in range(21)],
        (f"correct steps (n={len(correct)})", correct),
        (f"wrong steps (n={len(wrong)})", wrong),
        "P(step correct)",
        "steps",
        f"{name}: step scores",
    )


def _two_histograms(
    bins: Any, good: tuple[str, Sequence[float]], bad: tuple[str, Sequence[float]], xlabel: str, ylabel: str, title: str
) -> str:
    fig, ax = _figure()
    for (label, values), colour in ((good, CHOSEN_COLOUR), (bad, REJECTED_COLOUR)):
        ax.hist(values, bins=bins, alpha=0.6, color=colour, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    return _png(fig)


def calibration_plot(name: str, calibration: Mapping[str, Any]) -> str | None:
    bins = [b for b in calibration.get("bins", []) if b.get("count")]
    if not bins:
        return None
    fig, ax = _figure()
    ax.plot([0.5, 1.0], [0.5, 1.0], linestyle="--", color="#888", label="perfect calibration")
    ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o", label="this model")
    for b in bins:
        ax.annotate(
            str(b["count"]), (b["confidence"], b["accuracy"]), fontsize=7, textcoords="offset points", xytext=(3, 3)
        )
    ax.set_xlim(0.48, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("confidence max(p, 1-p), p = sigmoid(margin)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"{name}: reliability (ECE {calibration.get('ece', 0):.3f})")
    ax.legend(loc="lower right")
    return _png(fig)


def length_bias_plot(name: str, pairs: Sequence[Any], bias: Mapping[str, Any]) -> str | None:
    usable = [p for p in pairs if p.len_chosen is not None and p.len_rejected is not None]
    if not usable or not bias:
        return None
    fig, ax = _figure()
    ax.scatter(
        [p.len_chosen for p in usable], [p.chosen for p in usable], s=9, alpha=0.6, color=CHOSEN_COLOUR, label="chosen"
    )
    ax.scatter(
        [p.len_rejected for p in usable],
        [p.rejected for p in usable],
        s=9,
        alpha=0.6,
        color=REJECTED_COLOUR,
        label="rejected",
    )
    corr = bias.get("pearson")
    ax.set_title(f"{name}: reward vs length (r = {corr:.2f})" if corr is not None else f"{name}: reward vs length")
    ax.set_xlabel("response length (characters)")
    ax.set_ylabel("reward")
    ax.legend()
    return _png(fig)


def bars_plot(title: str, values: Mapping[str, float]) -> str | None:
    if not values:
        return None
    names = list(values)
    fig, ax = _figure(5.2, max(2.0, 0.32 * len(names) + 1.0))
    ax.barh(names, [100 * values[n] for n in names], color="#1c7ed6")
    for i, n in enumerate(names):
        ax.text(100 * values[n] + 1, i, f"{100 * values[n]:.1f}", va="center", fontsize=8)
    ax.set_xlim(0, 110)
    ax.invert_yaxis()
    ax.set_xlabel("accuracy / score (%)")
    ax.set_title(title)
    return _png(fig)


# ----------------------------------------------------------------- sections
