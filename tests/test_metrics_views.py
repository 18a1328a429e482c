"""episode and num_tokens in the live view, the gradient norm in the report's loss plot, and the final
evaluation drawn at the step whose weights it scored."""

from __future__ import annotations

import json

from rich.console import Console

from rmspec.evaluate.report import build_html, curve_series
from rmspec.render.live_view import RunProgress, render
from rmspec.render.report_view import final_model_line

ROWS = [
    {"event": "train_begin", "step": 0, "max_steps": 12, "time": 0.0},
    {
        "step": 6,
        "max_steps": 12,
        "train/rm/loss": 0.4,
        "grad_norm": 2.5,
        "num_tokens": 1234567,
        "episode": 48,
        "time": 3.0,
    },
    {"step": 6, "max_steps": 12, "eval/rm/loss": 0.7, "eval/rm/accuracy": 0.6, "time": 3.1},
    {
        "step": 12,
        "max_steps": 12,
        "train/rm/loss": 0.1,
        "grad_norm": 0.5,
        "num_tokens": 2469134,
        "episode": 96,
        "time": 6.0,
    },
    {"step": 12, "max_steps": 12, "eval/rm/loss": 0.9, "eval/rm/accuracy": 0.55, "time": 6.1},
    {"step": 12, "max_steps": 12, "eval/rm/loss": 0.7, "eval/rm/accuracy": 0.6, "model_step": 6, "time": 6.2},
]


def test_the_live_view_shows_pairs_and_tokens_seen():
    progress = RunProgress()
    for row in ROWS[:2]:
        progress.update(row)
    assert "episode 48" in progress.line() and "tokens 1,234,567" in progress.line()
    progress.update(ROWS[3])
    assert "episode 96" in progress.line() and "tokens 2,469,134" in progress.line()
    console = Console(width=120, record=True)
    console.print(render(progress, "run"))
    screen = console.export_text()
    assert "episode (pairs seen)  96" in screen and "tokens seen  2,469,134" in screen


def test_the_loss_plot_carries_the_gradient_norm_of_every_logged_step():
    series = curve_series(ROWS, "loss")
    assert series["grad_norm"] == [(6, 2.5), (12, 0.5)]
    assert series["train/rm/loss"] == [(6, 0.4), (12, 0.1)]
    # the final evaluation (model_step 6: the best checkpoint) is drawn at step 6, not at 12
    assert series["eval/rm/loss"] == [(6, 0.7), (12, 0.9), (6, 0.7)]
    assert "grad_norm" not in curve_series(ROWS, "accuracy")


def test_the_report_names_what_run_model_holds(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    why = "eval/rm/loss was lowest (0.7) at step 6 of the evaluations every 6 steps"
    facts = {
        "kind": "best",
        "step": 6,
        "checkpoint": "x/checkpoint-6",
        "metric": "eval/rm/loss",
        "value": 0.7,
        "why": why,
    }
    (run / "status.json").write_text(json.dumps({"state": "completed", "final_model": facts}))
    html = build_html(run)
    assert "Model: the best checkpoint, step 6" in html and why in html
    assert final_model_line({"kind": "last", "step": 12}) == "Model: the last step's weights (step 12)."
    assert final_model_line(None) is None
