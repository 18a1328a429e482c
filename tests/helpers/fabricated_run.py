"""A run directory as the trainer leaves it, fabricated around a model folder (eval and score tests)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import REPO
from helpers.ci import need

torch = need("torch")
transformers = need("transformers")


def fabricate_run(run: Path, model_dir: Path, benchmark: Path) -> Path:
    """What the trainer leaves behind: model/, plan.json (naming the spec), metrics, data report, versions, status."""
    import shutil

    spec_text = (REPO / "specs" / "quickstart.yaml").read_text()
    spec_text = spec_text.replace(
        "../rmspec/data/demo/preferences.jsonl", str(REPO / "rmspec/data/demo/preferences.jsonl")
    )
    spec_text = spec_text.replace("../rmspec/data/demo/benchmark_pairs.jsonl", str(benchmark))
    # A 60-row slice of the demo data: the real data pipeline rebuilds the validation split fast.
    spec_text = spec_text.replace("    kind: files\n", "    kind: files\n    limit: 60\n", 1)
    run.mkdir(parents=True)
    (run / "spec.yaml").write_text(spec_text)
    shutil.copytree(model_dir, run / "model")
    (run / "plan.json").write_text(
        json.dumps(
            {
                "strategy": "single",
                "precision": "fp32",
                "num_processes": 1,
                "spec_path": str(run / "spec.yaml"),
                "global_batch_size": 16,
            }
        )
    )
    metrics = [
        {"step": s, "epoch": s / 50, "train/rm/loss": 0.69 - 0.003 * s, "train/rm/accuracy": 0.5 + 0.003 * s}
        for s in range(10, 101, 10)
    ]
    metrics.append({"step": 100, "epoch": 2.0, "eval/rm/loss": 0.45, "eval/rm/accuracy": 0.78})
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (run / "data_report.json").write_text(
        json.dumps(
            {
                "rows_read": 3200,
                "rows_kept": 3150,
                "rejected": {"empty": 20, "identical": 30},
                "splits": {"train": 2835, "validation": 315},
                "length_heuristic_accuracy": 0.61,
            }
        )
    )
    (run / "versions.json").write_text(
        json.dumps({"python": "3.11", "torch": torch.__version__, "transformers": transformers.__version__})
    )
    (run / "status.json").write_text(json.dumps({"state": "completed"}))
    return run
