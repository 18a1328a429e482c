"""Rich console view of a run: its status, last metrics and evaluation, read from the run directory only (no torch)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rmspec.render.console import make_console
from rmspec.spec.benchmarks import PROCESS


def stdout_console() -> Console:
    return make_console()  # the terminal's width, or a wide page in a pipe: paths never wrapped


def pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def scored_entries(results: Mapping[str, Any]) -> dict[str, Any]:
    """The entries with a benchmark's figures: the validation pairs (not an approach's table of named
    metrics, kind `metrics`), then the benchmarks."""
    entries = dict(results.get("benchmarks") or {})
    validation = results.get("validation")
    if validation and validation.get("kind") != "metrics":
        entries = {"validation": validation, **entries}
    return entries


def benchmark_table(results: Mapping[str, Any]) -> Table:
    table = Table(title="Benchmarks (official scoring)", title_justify="left")
    for column in ("benchmark", "overall", "examples", "sections"):
        table.add_column(column, justify="right" if column in ("overall", "examples") else "left")
    entries = scored_entries(results)
    for name, entry in entries.items():
        sections = ", ".join(f"{k} {pct(v)}" for k, v in (entry.get("sections") or {}).items())
        table.add_row(name, pct(entry.get("overall")), str(entry.get("num_examples", "")), sections or "-")
    return table


def subset_table(name: str, entry: Mapping[str, Any]) -> Table:
    table = Table(title=f"{name}: subsets", title_justify="left")
    table.add_column("subset")
    table.add_column("accuracy", justify="right")
    table.add_column("examples", justify="right")
    counts = entry.get("counts") or {}
    for subset, value in sorted((entry.get("subsets") or {}).items()):
        table.add_row(subset, pct(value), str(counts.get(subset, "")))
    return table


def source_table(name: str, entry: Mapping[str, Any]) -> Table:
    """A mixture's validation accuracy per dataset (data.sources[].name)."""
    table = Table(title=f"{name}: per dataset", title_justify="left")
    table.add_column("dataset")
    table.add_column("accuracy", justify="right")
    table.add_column("examples", justify="right")
    for source, figures in entry["per_source"].items():
        table.add_row(source, pct(figures.get("accuracy")), str(figures.get("count", "")))
    return table


def diagnostics_lines(name: str, entry: Mapping[str, Any]) -> list[Text]:
    diag = entry.get("diagnostics") or {}
    if not diag:
        return []
    if "verdicts" in diag:
        v = diag["verdicts"]
        return [
            Text(f"{name}: ", style="bold")
            + Text(
                f"verdicts consistent under swap {pct(v.get('consistency'))}; "
                f"first position chosen {pct(v.get('position_bias_A'))}; "
                f"unparsed {v.get('n_unparsed')} of {2 * v.get('n', 0)}"
            )
        ]
    if (
        "first_error_confusion" in diag or entry.get("scorer") == PROCESS
    ):  # steps (a PRM): step metrics, official figures
        splits = (entry.get("details") or {}).get("splits") or {}
        per = "; ".join(
            f"{k} error {pct(v.get('acc_error'))} correct {pct(v.get('acc_correct'))}" for k, v in splits.items()
        )
        tuned = (entry.get("details") or {}).get("tuned")
        return [
            Text(f"{name}: ", style="bold")
            + Text(
                f"threshold {diag.get('threshold')}; step accuracy {pct(diag.get('step_accuracy'))}, "
                f"AUROC {_num(diag.get('auroc'))}, "
                f"first-error accuracy {pct(diag.get('first_error_accuracy'))}"
                + (f"; {per}" if per else "")
                + (
                    f"; tuned threshold {tuned['threshold']} (not the headline): {pct(tuned['overall'])}"
                    if tuned
                    else ""
                )
            )
        ]
    cal = diag.get("calibration") or {}
    bias = diag.get("length_bias") or {}
    rewards = diag.get("rewards") or {}
    lines = [
        Text(f"{name}: ", style="bold")
        + Text(
            f"ECE {_num(cal.get('ece'))}; reward chosen {_num((rewards.get('chosen') or {}).get('mean'))} "
            f"vs rejected {_num((rewards.get('rejected') or {}).get('mean'))}"
        )
    ]
    if bias:
        lines.append(
            Text(
                f"  length bias: corr(reward, length) {_num(bias.get('pearson'), 2)}; accuracy when chosen is longer "
                f"{pct(bias.get('accuracy_chosen_longer'))} (n={bias.get('n_chosen_longer')}), shorter "
                f"{pct(bias.get('accuracy_chosen_shorter'))} (n={bias.get('n_chosen_shorter')})"
            )
        )
    return lines


def print_results(results: Mapping[str, Any], console: Console | None = None, details: bool = True) -> None:
    console = console or stdout_console()
    console.print(Text(f"model: {results.get('model')}", style="dim"))
    metrics = (results.get("validation") or {}).get("metrics")
    if metrics:  # the approach's own validation metrics, under their results.json names
        table = Table(title="Validation (the approach's metrics)", title_justify="left")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in metrics.items():
            table.add_row(name, _num(value, 4))
        console.print(table)
    if scored_entries(results):  # no empty benchmark table for a run without benchmarks
        console.print(benchmark_table(results))
    entries = dict(results.get("benchmarks") or {})
    if results.get("validation"):
        entries = {"validation": results["validation"], **entries}
    if details:
        for name, entry in entries.items():
            if len(entry.get("subsets") or {}) > 1:
                console.print(subset_table(name, entry))
            if entry.get("per_source"):
                console.print(source_table(name, entry))
    for name, entry in entries.items():
        for line in diagnostics_lines(name, entry):
            console.print(line)
        for note in entry.get("notes") or []:
            console.print(Text(f"  note ({name}): {note}", style="yellow"))
    stats = results.get("reward_stats")
    if stats:
        console.print(
            Text(
                f"reward mean {_num(stats['mean'])}, std {_num(stats['std'])} (from {stats['source']}) "
                "saved in the model config"
            )
        )
    for note in results.get("notes") or []:
        console.print(Text(f"note: {note}", style="yellow"))


def final_model_line(facts: Mapping[str, Any] | None) -> str | None:
    """What RUN/model holds (status.json's final_model): the step, and why for a selected checkpoint."""
    if not facts:
        return None
    if facts.get("kind") != "best":
        return f"Model: the last step's weights (step {facts.get('step')})."
    return (
        f"Model: the best checkpoint, step {facts.get('step')} (training.final_model: best): {facts.get('why')}; "
        "the final evaluation ran on it."
    )


def print_run_summary(run_dir: Path, console: Console | None = None) -> None:
    """The end-of-run summary: status, last training metrics, benchmarks, diagnostics, report path."""
    from rmspec.rundir import RunDir, last_metrics, read_status
    from rmspec.rundir.results import read_results

    console = console or stdout_console()
    run_dir = Path(run_dir)
    run = RunDir(run_dir)
    status = read_status(run).shown_state
    console.print(Text(f"run {run_dir}", style="bold") + Text(f"  status: {status or 'unknown'}"))
    last = last_metrics(run.metrics)
    if last:
        keys = ("train/rm/loss", "train/rm/accuracy", "eval/rm/loss", "eval/rm/accuracy")
        shown = ", ".join(f"{k} {_num(last[k])}" for k in keys if k in last)
        console.print(Text(f"last step {last.get('step', '-')}: {shown}"))
    chosen = final_model_line(read_status(run).get("final_model"))
    if chosen:
        console.print(Text(chosen))
    if run.results.exists():
        print_results(read_results(run.results), console, details=True)
    else:
        console.print(Text("no results.json yet: run `rmspec eval RUN_DIR`", style="yellow"))
    if run.report_html.exists():
        console.print(Text(f"report: {run.report_html}"))
