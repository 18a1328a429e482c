"""The single-file HTML report of a run: every plot a PNG embedded as base64, no external assets.

Reads only the run directory's files (results.json, eval/*.jsonl, metrics.jsonl,
data_report.json, plan.json, versions.json, status.json), so `rmspec report RUN` rebuilds it
without torch. Plots use matplotlib's object API (no pyplot state, no display needed).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.evaluate import registry
from rmspec.evaluate.html_parts import esc, img, kv_table, pct, table
from rmspec.evaluate.results import read_jsonl, read_results
from rmspec.render.report_view import final_model_line
from rmspec.rundir import RunDir, atomic_write_text, read_status
from rmspec.spec.benchmarks import PROCESS, REWARD

CHOSEN_COLOUR, REJECTED_COLOUR = "#2b8a3e", "#c92a2a"
CURVE_KEYS = {
    "loss": ("train/rm/loss", "eval/rm/loss"),
    "accuracy": ("train/rm/accuracy", "eval/rm/accuracy"),
}
# Drawn on a second axis of a plot: the gradient norm (before clipping, as Trainer logs it) beside the loss.
SECOND_AXIS = {"loss": ("grad_norm",)}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.3rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:.6rem 0}td,th{border:1px solid #ddd;padding:.25rem .6rem;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.plots{display:flex;flex-wrap:wrap;gap:1rem}.plots figure{margin:0}.plots img{max-width:520px;border:1px solid #eee}
.note{color:#8a5a00}.muted{color:#777}pre{background:#f7f7f7;padding:.8rem;overflow:auto;max-height:28rem}
"""


# ----------------------------------------------------------------- reading the run


def _read_json(path: Path) -> Any:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a run killed mid-write leaves a partial last line
    return rows


def per_example_file(run_dir: Path, entry: Mapping[str, Any]) -> Path | None:
    """The entry's JSONL, also when the run directory has moved since evaluation."""
    recorded = Path(entry.get("per_example_path") or "")
    for candidate in (recorded, run_dir / "eval" / recorded.name):
        if candidate.is_file():
            return candidate
    return None


# ----------------------------------------------------------------- plots


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


def _entry_section(run_dir: Path, name: str, entry: Mapping[str, Any]) -> tuple[str, int]:
    parts = [
        f"<h3>{esc(name)} <span class=muted>({esc(entry.get('kind'))}, {entry.get('num_examples')} examples"
        f"{', ' + esc(entry['source']) if entry.get('source') else ''})</span></h3>",
        f"<p>Overall: <b>{pct(entry.get('overall'))}</b></p>",
    ]
    counts = entry.get("counts") or {}
    subsets = entry.get("subsets") or {}
    if entry.get("sections"):
        parts.append(table(("section", "score"), [(k, pct(v)) for k, v in entry["sections"].items()], numeric=(1,)))
    if subsets:
        parts.append(
            table(
                ("subset", "score", "examples"),
                [(k, pct(v), counts.get(k, "")) for k, v in sorted(subsets.items())],
                numeric=(1, 2),
            )
        )
    if entry.get("per_source"):  # a mixture: accuracy per dataset
        parts.append(
            table(
                ("dataset", "accuracy", "examples"),
                [(k, pct(v.get("accuracy")), v.get("count", "")) for k, v in entry["per_source"].items()],
                numeric=(1, 2),
            )
        )
    kind = registry.get(entry.get("kind", "pairs"))
    parts += kind.report_html(entry)
    for note in entry.get("notes") or []:
        parts.append(f"<p class=note>note: {esc(note)}</p>")
    diag = entry.get("diagnostics") or {}
    plots: list[str | None] = []  # a plot that had nothing to draw is None, dropped below
    path = per_example_file(run_dir, entry)
    rows = read_jsonl(path) if path else []
    verdicts = diag.get("verdicts") or {}
    scorer = entry.get("scorer") or registry.infer_scorer(entry.get("kind", "pairs"), rows)
    if rows and scorer == PROCESS:  # steps, not pairs
        return "\n".join(parts + [process_section(name, entry, rows)]), 1
    pairs = kind.pairs(rows) if rows and scorer == REWARD else []
    if verdicts:
        games = verdicts.get("double_game") or {}
        parts.append(
            table(
                ("judge verdicts (both orders)", "value"),
                [
                    ("consistent when the responses swap places", pct(verdicts.get("consistency"))),
                    (
                        "share of verdicts naming the first position (0.5 = no position bias)",
                        pct(verdicts.get("position_bias_A")),
                    ),
                    ("accuracy, original order", pct(verdicts.get("accuracy_first_order"))),
                    ("accuracy, swapped order", pct(verdicts.get("accuracy_swapped_order"))),
                    (
                        "two games: correct / incorrect / tie",
                        " / ".join(pct(games.get(k)) for k in ("correct", "incorrect", "tie")),
                    ),
                    ("unparsed verdicts", verdicts.get("n_unparsed")),
                ],
            )
        )
    if pairs:
        plots.append(histogram_plot(name, [p.chosen for p in pairs], [p.rejected for p in pairs]))
    if diag.get("calibration"):
        plots.append(calibration_plot(name, diag["calibration"]))
    if pairs:
        plots.append(length_bias_plot(name, pairs, diag.get("length_bias") or {}))
    if len(entry.get("sections") or {}) > 1:
        plots.append(bars_plot(f"{name}: sections", entry["sections"]))
    if len(subsets) > 1:
        plots.append(bars_plot(f"{name}: subsets", subsets))
    plots = [p for p in plots if p]
    parts.append('<div class="plots">' + "".join(img(p, f"{name} plot") for p in plots) + "</div>")
    bias = diag.get("length_bias") or {}
    if bias:
        parts.append(
            table(
                ("length bias", "value"),
                [
                    (
                        "corr(reward, length), Pearson",
                        f"{bias['pearson']:.3f}" if bias.get("pearson") is not None else "-",
                    ),
                    (
                        "corr(reward, length), Spearman",
                        f"{bias['spearman']:.3f}" if bias.get("spearman") is not None else "-",
                    ),
                    (
                        f"accuracy when chosen is longer (n={bias.get('n_chosen_longer')})",
                        pct(bias.get("accuracy_chosen_longer")),
                    ),
                    (
                        f"accuracy when chosen is shorter (n={bias.get('n_chosen_shorter')})",
                        pct(bias.get("accuracy_chosen_shorter")),
                    ),
                    ("accuracy of 'the longer response wins'", pct(bias.get("length_heuristic_accuracy"))),
                ],
            )
        )
    cal = diag.get("calibration") or {}
    if cal.get("bins"):
        parts.append(
            "<details><summary>reliability table</summary>"
            + table(
                ("confidence bin", "pairs", "mean confidence", "accuracy"),
                [
                    (
                        f"{b['lo']:.2f}-{b['hi']:.2f}",
                        b["count"],
                        "-" if b["confidence"] is None else f"{b['confidence']:.3f}",
                        pct(b["accuracy"]),
                    )
                    for b in cal["bins"]
                ],
                numeric=(1, 2, 3),
            )
            + "</details>"
        )
    rewards = diag.get("rewards") or {}
    if rewards.get("chosen"):
        parts.append(
            table(
                ("rewards", "mean", "std", "min", "max"),
                [
                    (side, *(f"{rewards[side][k]:.3f}" for k in ("mean", "std", "min", "max")))
                    for side in ("chosen", "rejected", "all")
                ],
                numeric=(1, 2, 3, 4),
            )
        )
    return "\n".join(parts), len(plots)


def process_section(name: str, entry: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """A PRM's entry: per-split official figures, the threshold (and a tuned one, labelled), the
    step metrics, the first-error confusion table and the step-score distributions."""
    from rmspec.evaluate.kinds.processbench import step_score_split

    details = entry.get("details") or {}
    diag = entry.get("diagnostics") or {}
    parts = []
    if details.get("splits"):
        parts.append(
            table(
                ("split", "acc_error", "acc_correct", "F1", "erroneous", "correct"),
                [
                    (k, pct(v["acc_error"]), pct(v["acc_correct"]), pct(v["f1"]), v["num_error"], v["num_correct"])
                    for k, v in details["splits"].items()
                ],
                numeric=(1, 2, 3, 4, 5),
            )
        )
    rows_kv = [
        ("decision threshold (P(correct) < t marks a wrong step)", diag.get("threshold", details.get("threshold")))
    ]
    tuned = details.get("tuned")
    if tuned:
        rows_kv.append(
            (
                f"tuned threshold (on the {tuned['tuned_on']}; NOT the headline)",
                f"{tuned['threshold']}: mean F1 {pct(tuned['overall'])}",
            )
        )
    rows_kv += [
        ("step accuracy", pct(diag.get("step_accuracy"))),
        ("step AUROC", "-" if diag.get("auroc") is None else f"{diag['auroc']:.3f}"),
        ("first-error accuracy", pct(diag.get("first_error_accuracy"))),
    ]
    parts.append(table(("", "value"), rows_kv))
    conf = diag.get("first_error_confusion") or {}
    if conf.get("labels"):
        parts.append(
            "<h4>first wrong step: gold (rows) x predicted (columns)</h4>"
            + table(
                ("gold \\ predicted", *conf["labels"]),
                [(g, *row) for g, row in zip(conf["labels"], conf["matrix"])],
                numeric=tuple(range(1, len(conf["labels"]) + 1)),
            )
        )
    good, bad = step_score_split(list(rows))
    plot = step_score_plot(name, good, bad) if good or bad else None
    parts.append('<div class="plots">' + img(plot, f"{name} step scores") + "</div>")
    return "\n".join(parts)


def _plan_section(plan: Mapping[str, Any] | None) -> str:
    if not plan:
        return "<p class=muted>plan.json not found.</p>"
    keys = (
        "strategy",
        "precision",
        "num_processes",
        "num_machines",
        "micro_batch_size",
        "gradient_accumulation_steps",
        "global_batch_size",
        "gradient_checkpointing",
        "memory_per_device_gb",
        "device_capacity_gb",
        "model_path",
        "attn_implementation",
        "launch_command",
        "spec_hash",
    )
    shown = {k: plan[k] for k in keys if k in plan}
    return (
        kv_table(shown)
        + f"<details><summary>full plan.json</summary><pre>{esc(json.dumps(plan, indent=2))}</pre></details>"
    )


def _data_section(report: Mapping[str, Any] | None) -> str:
    if not report:
        return "<p class=muted>data_report.json not found.</p>"
    parts = []
    simple = {k: v for k, v in report.items() if not isinstance(v, (dict, list))}
    if simple:
        parts.append(kv_table(simple))
    for key, value in report.items():
        if isinstance(value, dict) and value and all(not isinstance(v, (dict, list)) for v in value.values()):
            parts.append(f"<h4>{esc(key)}</h4>" + table((key, "value"), list(value.items()), numeric=(1,)))
    parts.append(
        f"<details><summary>full data_report.json</summary><pre>{esc(json.dumps(report, indent=2))}</pre></details>"
    )
    return "\n".join(parts)


def build_html(run_dir: Path) -> str:
    rd = RunDir(Path(run_dir))
    results = read_results(rd.results) if rd.results.exists() else None
    metrics = read_metrics(rd.metrics)
    name = (results or {}).get("run") or rd.root.name
    state = read_status(rd).shown_state or "unknown"
    if state == "evaluating":  # the end-of-run evaluation writes this report before marking the run done
        state = "training completed"

    body = [
        f"<h1>rmspec report: {esc(name)}</h1>",
        f"<p class=muted>run directory {esc(rd.root.resolve())}; status {esc(state)}"
        f"{'; evaluated ' + esc(results['created']) if results else ''}</p>",
    ]

    body.append("<h2>Summary</h2>")
    if results:
        entries = dict(results.get("benchmarks") or {})
        if results.get("validation"):
            entries = {"validation": results["validation"], **entries}
        body.append(
            table(
                ("evaluation", "kind", "overall", "examples"),
                [(n, e.get("kind"), pct(e.get("overall")), e.get("num_examples")) for n, e in entries.items()],
                numeric=(2, 3),
            )
        )
        stats = results.get("reward_stats")
        if stats:
            body.append(
                f"<p>Reward mean {stats['mean']:.4f}, std {stats['std']:.4f} (from {esc(stats['source'])}), saved in model/config.json as reward_mean / reward_std.</p>"
            )
        for note in results.get("notes") or []:
            body.append(f"<p class=note>note: {esc(note)}</p>")
    else:
        body.append("<p class=note>No results.json: the run has not been evaluated (rmspec eval RUN_DIR).</p>")

    body.append("<h2>Training</h2>")
    curves = [curve_plot(metrics, what) for what in CURVE_KEYS] if metrics else []
    curves = [c for c in curves if c]
    if curves:
        body.append('<div class="plots">' + "".join(img(c, "training curve") for c in curves) + "</div>")
        last = metrics[-1]
        body.append(
            f"<p class=muted>{len(metrics)} logged steps; last step {last.get('step')}, epoch {last.get('epoch')}.</p>"
        )
    else:
        body.append("<p class=muted>metrics.jsonl not found or empty.</p>")
    chosen = final_model_line(read_status(rd).get("final_model"))
    if chosen:
        body.append(f"<p>{esc(chosen)}</p>")

    if results:
        body.append("<h2>Evaluation</h2>")
        entries = dict(results.get("benchmarks") or {})
        if results.get("validation"):
            entries = {"validation": results["validation"], **entries}
        for entry_name, entry in entries.items():
            section, _ = _entry_section(rd.root, entry_name, entry)
            body.append(section)

    body.append("<h2>Data</h2>" + _data_section(_read_json(rd.data_report)))
    body.append("<h2>Plan that ran</h2>" + _plan_section(_read_json(rd.plan)))
    versions = _read_json(rd.versions)
    body.append(
        "<h2>Environment</h2>"
        + (kv_table(versions) if isinstance(versions, dict) else "<p class=muted>versions.json not found.</p>")
    )
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>rmspec report: {esc(name)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_html_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write RUN/report.html (or out) atomically; returns its path."""
    rd = RunDir(Path(run_dir))
    path = out or rd.report_html
    atomic_write_text(path, build_html(rd.root))
    return path
