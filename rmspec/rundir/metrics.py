"""RUN/metrics.jsonl: one JSON object per logging step, appended by the trainer's callback.

Light: no torch. The live view follows the file as it grows (rmspec.render.live_view).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmspec.rundir.layout import atomic_write_text


def truncate_metrics_after(path: Path, step: int) -> None:
    """On resume, drop the rows the interrupted run logged after its last checkpoint."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("step", 0) <= step and row.get("event") != "train_begin":
            kept.append(line)
    atomic_write_text(path, "".join(line + "\n" for line in kept))


def last_metrics(path: Path) -> dict[str, Any]:
    """Every key's last non-null value over the rows (a line cut short by a live writer is skipped)."""
    last: dict[str, Any] = {}
    if not path.exists():
        return last
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                last.update({k: v for k, v in json.loads(line).items() if v is not None})
            except json.JSONDecodeError:
                continue
    return last
