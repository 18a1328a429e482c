"""Rich views for `rmspec annotate`: import counts and the agreement report (plain dicts in, rich out)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from rmspec.render.console import make_console


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def print_import(counts: dict[str, Any], out: str, rejects: str, console: Console | None = None) -> None:
    console = console or make_console(stderr=True)
    t = Table(title=f"annotate import ({counts['policy']}, ties {counts['ties']})", show_header=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("tasks read", str(counts["tasks_read"]))
    t.add_row("tasks with rows", str(counts["tasks_with_rows"]))
    for reason, n in sorted(counts["tasks_rejected"].items()):
        t.add_row(f"  rejected: {reason}", str(n))
    t.add_row(
        "annotations",
        f"{counts['annotations_read']} read = {counts['annotations_valid']} valid + "
        f"{counts['annotations_cancelled']} cancelled + {counts['annotations_invalid']} invalid",
    )
    if counts.get("votes"):
        t.add_row("votes (source order)", ", ".join(f"{k} {v}" for k, v in counts["votes"].items()))
    t.add_row(
        "rows written",
        f"{counts['rows_written']} -> {out}" + (f" ({counts['ties_kept']} ties)" if counts["ties_kept"] else ""),
    )
    t.add_row("rejects", rejects)
    console.print(t)


def print_agreement(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or make_console()
    console.print(
        f"[bold]{report['tasks_labelled']}[/] of {report['tasks']} tasks labelled, "
        f"{report['tasks_multiply_labelled']} by 2+ annotators; {report['annotations']} annotations by "
        f"{len(report['annotators'])} annotators; categories: {', '.join(report['categories'])} (A/B swap undone)"
    )
    overall = Table(title="agreement")
    for col in ("statistic", "value", "items", "note"):
        overall.add_column(col)
    f, k = report["fleiss"], report["krippendorff"]
    overall.add_row(
        "Fleiss' kappa", _num(f["kappa"]), f"{f['items']} x {f.get('raters_per_item')} raters", f.get("note", "")
    )
    overall.add_row("Krippendorff's alpha (nominal)", _num(k["alpha"]), str(k["items"]), k.get("note", ""))
    if "model" in report:
        m = report["model"]
        overall.add_row("model vs majority", _num(m["agreement"]), str(m["items"]), "non-tie majorities")
    console.print(overall)
    pairs = Table(title="Cohen's kappa per annotator pair")
    for col in ("a", "b", "items", "observed", "kappa", "note"):
        pairs.add_column(col)
    for row in report["cohen"]:
        pairs.add_row(
            row["a"], row["b"], str(row["items"]), _num(row["observed"]), _num(row["kappa"]), row.get("note", "")
        )
    console.print(pairs)
    each = Table(title="each annotator vs the majority")
    for col in ("annotator", "items", "agreement"):
        each.add_column(col)
    for row in report["versus_majority"]:
        each.add_row(row["annotator"], str(row["items"]), _num(row["agreement"]))
    console.print(each)
    if report["disagreements"]:
        dis = Table(title=f"tasks where annotators disagree ({len(report['disagreements'])})")
        for col in ("task", "source id", "labels", "majority"):
            dis.add_column(col)
        for row in report["disagreements"][:20]:
            dis.add_row(
                str(row["task_id"]),
                row["source_id"],
                ", ".join(f"{a}: {p}" for a, p in row["labels"].items()),
                row["majority"] or "none",
            )
        console.print(dis)
