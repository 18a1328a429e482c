"""The single-file HTML report of a run: every plot a PNG embedded as base64, no external assets.

Reads only the run directory's files (results.json, eval/*.jsonl, metrics.jsonl,
data_report.json, plan.json, versions.json, status.json), so `rmspec report RUN` rebuilds it
without torch. Plots use matplotlib's object API (no pyplot state, no display needed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmspec.evaluate.html_parts import esc, img, kv_table, pct, table
from rmspec.evaluate.report_entries import entry_section
from rmspec.evaluate.report_plots import CURVE_KEYS, curve_plot, curve_series
from rmspec.evaluate.report_sections import hyperparameters, throughput, validation_curve_note, worst_pairs
from rmspec.evaluate.results import read_results
from rmspec.render.report_view import final_model_line
from rmspec.rundir import RunDir, atomic_write_text, read_status

__all__ = ["build_html", "curve_series", "read_metrics", "write_html_report"]

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

    status = read_status(rd).to_json()
    plan = _read_json(rd.plan)
    body.append("<h2>Training setup</h2>" + hyperparameters(rd.root, plan, status))
    body.append("<h2>Time and throughput</h2>" + throughput(status, metrics))

    body.append("<h2>Training</h2>")
    curves = [curve_plot(metrics, what) for what in CURVE_KEYS] if metrics else []
    curves = [c for c in curves if c]
    if curves:
        body.append('<div class="plots">' + "".join(img(c, "training curve") for c in curves) + "</div>")
        last = next((r for r in reversed(metrics) if "step" in r), metrics[-1])  # not a stage note (no step)
        body.append(
            f"<p class=muted>{len(metrics)} logged steps; last step {last.get('step')}, epoch {last.get('epoch')}.</p>"
        )
        body.append(validation_curve_note(metrics))
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
            section, _ = entry_section(rd.root, entry_name, entry)
            body.append(section)
        body.append("<h2>Worst misranked pairs</h2>" + worst_pairs(rd.root, entries))

    body.append("<h2>Data</h2>" + _data_section(_read_json(rd.data_report)))
    body.append("<h2>Plan that ran</h2>" + _plan_section(plan))
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
