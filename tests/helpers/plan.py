"""A quickstart spec with its data source replaced, and a fixed host, for the planner tests."""

from __future__ import annotations

from pathlib import Path

from helpers import REPO
from rmspec.plan.hardware import HostFacts

HOST = HostFacts((), 16.0, (), 2)


def _spec(tmp_path: Path, source: str) -> Path:
    text = (REPO / "specs" / "quickstart.yaml").read_text()
    start = text.index("  source:")
    end = text.index("  mapping:")
    path = tmp_path / "spec.yaml"
    path.write_text(text[:start] + source + text[end:])
    return path
