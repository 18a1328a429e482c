"""Rich views of the data report and of previewed rows. Light side: rich only, from plain dicts
(`DataReport.to_json()` and preview records), so it never imports datasets or torch."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rmspec.render.console import make_console
from rmspec.spec.row_kinds import RowKind


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def heuristic_verdict(acc: float | None) -> tuple[str, str]:
    """What the length-heuristic accuracy means for training (text, style)."""
    if acc is None:
        return "not measured (no pairs tokenized)", "dim"
    if acc >= 0.6:
        return "longer is usually chosen: a model can score well by counting tokens; watch for length bias", "yellow"
    if acc <= 0.4:
        return "shorter is usually chosen: length is a strong (inverse) cue here", "yellow"
    return "near a coin flip: length alone does not predict the label", "green"


def report_view(report: dict[str, Any], rejects_path: str | None = None) -> Group:
    """The data report; ``rejects_path``: where this command wrote the rejected rows (None: not written)."""
    parts: list[Any] = []
    reconciled = report.get("reconciled")
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("rows read", str(report["rows_read"]))
    head.add_row("rows kept", str(report["rows_kept"]))
    head.add_row("rows rejected", str(report.get("rows_rejected", sum(report["rejected"].values()))))
    head.add_row(
        "counts reconcile",
        Text("yes: read + added by mapping = kept + rejected", style="green")
        if reconciled
        else Text("NO: some rows are unaccounted for", style="red bold"),
    )
    head.add_row("splits", ", ".join(f"{k} {v}" for k, v in report["splits"].items()) or "-")
    if report.get("augmented"):
        head.add_row("augmented (train)", ", ".join(f"{k} {v}" for k, v in report["augmented"].items()))
    steps = report.get("steps") or {}
    if steps:  # process reward data: what the labels cover, and the steps max_length cost
        head.add_row(
            "steps",
            f"{steps['steps']} in {steps['rows']} rows ({steps['mean_steps_per_row']} a row), "
            f"{steps['wrong_steps']} wrong; {steps['rows_with_a_wrong_step']} rows with a wrong step",
        )
        head.add_row(
            "steps past max_length",
            f"{steps['steps_dropped_past_max_length']} dropped whole from the end of "
            f"{steps['rows_with_steps_dropped']} rows",
        )
    verdict, style = heuristic_verdict(report.get("length_heuristic_accuracy"))
    if report.get("approach") != "process":
        head.add_row(
            "length heuristic", Text(f"{_pct(report.get('length_heuristic_accuracy'))}  ") + Text(verdict, style=style)
        )
    head.add_row("truncated", _pct(report.get("truncation_rate")))
    if report.get("shared_prefix_cut_pairs"):
        head.add_row(
            "prompt cut for both",
            f"{report['shared_prefix_cut_pairs']} pairs: the shorter side lost more prompt "
            "than cut alone, so both sides answer the same prompt",
        )
    head.add_row("exact duplicates", _pct(report.get("duplicate_rate")))
    if report.get("approach") == RowKind.PAIRS:  # the report's `approach` is the row kind
        head.add_row("score ties", str(report.get("ties", 0)))
    layout = report.get("layout")
    if layout:
        head.add_row(
            "layout",
            {
                "pair": "text pair (encoder): [CLS] prompt [SEP] response [SEP]",
                "template": "the tokenizer's chat template",
                "plain": "plain 'User:/Assistant:' text",
            }.get(layout, layout),
        )
    if report.get("cached"):
        head.add_row(
            "cache", f"loaded prepared data ({report.get('fingerprint', '')[:12]}) in {report.get('seconds', 0):.2f} s"
        )
    elif report.get("seconds"):
        head.add_row("prepared in", f"{report['seconds']:.2f} s")
    parts.append(Panel(head, title="data report", expand=False))

    mixture = report.get("mixture")
    if mixture:  # data.sources: where each dataset's rows went, and how they were mixed
        t = Table(
            title=f"per dataset ({mixture.get('method')}"
            + (f", {mixture['stopping_strategy']}" if mixture.get("stopping_strategy") else "")
            + ")"
        )
        for col in (
            "dataset",
            "weight",
            "read",
            "kept",
            "rejected",
            "sampled out",
            "train",
            "repeats",
            "validation",
            "reconciled",
        ):
            t.add_column(col, justify="left" if col == "dataset" else "right")
        for name, src in report.get("sources", {}).items():
            sampled = sum(
                r.get("sampled_out", 0) for st, r in src.get("rejected_by_stage", {}).items() if st.startswith("mix:")
            )
            weight = src.get("weight")
            t.add_row(
                name,
                "-" if weight is None else f"{weight:g}",
                str(src["rows_read"]),
                str(src["rows_kept"]),
                str(src["rows_rejected"]),
                str(sampled),
                str(src.get("rows_train", "")),
                str(src.get("rows_repeated", 0)),
                str(src.get("rows_validation", "")),
                "yes" if src.get("reconciled") else Text("NO", style="red"),
            )
        parts.append(t)

    stages = {}
    for name, src in report.get("sources", {}).items():
        for stage, reasons in src.get("rejected_by_stage", {}).items():
            for reason, n in reasons.items():
                stages[(name, stage, reason)] = n
    if stages:
        where = (
            f"each written with its reason to {rejects_path}"
            if rejects_path
            else "not written: add --rejects FILE to write each with its reason"
        )
        t = Table(title=f"rejected rows ({where})", title_justify="left")
        for col in ("source", "stage", "reason", "rows"):
            t.add_column(col, justify="right" if col == "rows" else "left")
        for (name, stage, reason), n in stages.items():
            t.add_row(name, stage, reason, str(n))
        parts.append(t)

    lengths = report.get("token_lengths") or {}
    if lengths:
        limit = report.get("max_length")
        t = Table(title=f"token lengths (max_length {limit})")
        t.add_column("")
        for col in ("count", "mean", "p50", "p90", "p99", "max", f"> {limit}"):
            t.add_column(col, justify="right")
        for name, d in lengths.items():
            if not d.get("count"):
                continue
            over = d.get("over_max_length")
            t.add_row(
                name,
                str(d["count"]),
                f"{d['mean']:.0f}",
                f"{d['p50']:.0f}",
                f"{d['p90']:.0f}",
                f"{d['p99']:.0f}",
                f"{d['max']:.0f}",
                "" if over is None else Text(str(over), style="yellow" if over else ""),
            )
        parts.append(t)
        buckets = _buckets(lengths)
        if buckets is not None:
            parts.append(buckets)

    images = report.get("images")
    if images:  # rows with images (rmspec.vision.tokens.summary)
        parts.append(_images(images, bool(lengths)))

    groups = report.get("groups") or {}
    if groups:
        t = Table(title="per group")
        t.add_column("group")
        t.add_column("rows", justify="right")
        t.add_column("validation", justify="right")
        t.add_column("length heuristic", justify="right")
        for g, d in groups.items():
            t.add_row(g, str(d["rows"]), str(d.get("validation", 0)), _pct(d.get("length_heuristic_accuracy")))
        parts.append(t)
    for note in report.get("notes", []):
        parts.append(Text("note: " + note, style="dim"))
    return Group(*parts)


def _images(images: dict[str, Any], lengths: bool) -> Text:
    """The images line: how many, their sizes, and the visual tokens per row the model reads."""
    per_row = images.get("images_per_row") or {}
    line = (
        f"images: {images.get('images', 0):,} in {images.get('rows_with_images', 0):,} of {images.get('rows', 0):,} "
        f"rows (mean {per_row.get('mean', 0):g}, at most {per_row.get('max', 0)} per row)"
    )
    if images.get("width"):
        w, h = images["width"], images["height"]
        line += f"; width {w['min']}-{w['max']} (median {w['median']:g}), height {h['min']}-{h['max']} (median {h['median']:g})"
    tokens = images.get("visual_tokens_per_row")
    if tokens:
        p = images.get("processor") or {}
        line += (
            f"; visual tokens per row: mean {tokens['mean']:g}, max {tokens['max']:,} (min_pixels "
            f"{p.get('min_pixels', 0):,}, max_pixels {p.get('max_pixels', 0):,})"
            + ("; the token lengths above include them" if lengths else "")
        )
    return Text(line)


def preview_view(records: list[dict[str, Any]]) -> Group:
    parts: list[Any] = []
    for rec in records:
        body = Table.grid(padding=(0, 1))
        body.add_column(style="bold cyan", no_wrap=True)
        body.add_column()
        for key, value in rec.items():
            if key in ("id",):
                continue
            if isinstance(value, list) and value and isinstance(value[0], dict):
                value = "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in value)
            body.add_row(key, Text(str(value)))
        parts.append(Panel(body, title=f"{rec.get('id', '')}", title_align="left"))
    return Group(*parts)


def print_report(report: dict[str, Any], console: Console | None = None, rejects_path: str | None = None) -> None:
    (console or make_console()).print(report_view(report, rejects_path))


def print_preview(records: list[dict[str, Any]], rejected: dict[str, int], console: Console | None = None) -> None:
    console = console or make_console()
    console.print(preview_view(records))
    if rejected:
        console.print(
            Text("rejected while previewing: " + ", ".join(f"{k} {v}" for k, v in rejected.items()), style="yellow")
        )


def _buckets(lengths: dict[str, Any]) -> Table | None:
    """Rows per length bucket (tokens, each bucket up to its edge), one row per length the report
    counts: where long rows sit against max_length (rmspec.data.report.length_buckets)."""
    rows = {name: d["buckets"] for name, d in lengths.items() if d.get("count") and d.get("buckets")}
    if not rows:
        return None
    labels = sorted({label for counts in rows.values() for label in counts}, key=_bucket_edge)
    t = Table(title="rows by length (tokens)")
    t.add_column("")
    for label in labels:
        t.add_column(label, justify="right")
    for name, counts in rows.items():
        t.add_row(name, *(str(counts.get(label, "")) for label in labels))
    return t


def _bucket_edge(label: str) -> float:
    """`<=512` -> 512, `<=4k` -> 4096, `>128k` -> past every edge."""
    number = label.lstrip("<=>")
    tokens = int(number[:-1]) * 1024 if number.endswith("k") else int(number)
    return tokens + 0.5 if label.startswith(">") else tokens
