"""One evaluation's section of the report: its tables, its kind's additions, its plots and diagnostics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.evaluate import registry
from rmspec.evaluate.html_parts import esc, img, pct, table
from rmspec.evaluate.report_plots import (
    bars_plot,
    calibration_plot,
    histogram_plot,
    length_bias_plot,
    step_score_plot,
)
from rmspec.evaluate.results import METRICS, read_jsonl
from rmspec.evaluate.row_readers import read_as


def per_example_file(run_dir: Path, entry: Mapping[str, Any]) -> Path | None:
    """The entry's JSONL, also when the run directory has moved since evaluation."""
    recorded = Path(entry.get("per_example_path") or "")
    for candidate in (recorded, run_dir / "eval" / recorded.name):
        if candidate.is_file():
            return candidate
    return None


def metrics_table(metrics: Mapping[str, Any]) -> str:
    """The approach's own validation metrics (results.json validation.metrics), under their names."""
    return table(
        ("validation metric", "value"),
        [(k, "-" if v is None else f"{v:.4f}") for k, v in metrics.items()],
        numeric=(1,),
    )


def entry_section(run_dir: Path, name: str, entry: Mapping[str, Any]) -> tuple[str, int]:
    parts = [
        f"<h3>{esc(name)} <span class=muted>({esc(entry.get('kind'))}, {entry.get('num_examples')} examples"
        f"{', ' + esc(entry['source']) if entry.get('source') else ''})</span></h3>",
    ]
    if entry.get("metrics"):
        parts.append(metrics_table(entry["metrics"]))
    if entry.get("kind") == METRICS:  # a table of named metrics, not a benchmark's rows
        return "\n".join(parts + [f"<p class=note>note: {esc(n)}</p>" for n in entry.get("notes") or []]), 0
    parts.append(f"<p>Overall: <b>{pct(entry.get('overall'))}</b></p>")
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
    reader = read_as(entry.get("kind", "pairs"), rows, entry.get("scorer"))
    if rows and reader.steps:  # steps, not pairs
        return "\n".join(parts + [process_section(name, entry, rows)]), 1
    pairs = reader.pairs(kind, rows) if rows else []
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
