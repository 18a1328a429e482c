"""The pieces every GPU measurement shares: a time budget, subprocess runs bounded by it, the Markdown
result file, and the device as nvidia-smi and torch name it. Standard library only at import time."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUDGET_S = 540  # 9 minutes: the device tool stops a command at 10


@dataclass
class Budget:
    """A deadline for one batch (one device call); measurements ask it before each case."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def allows(self, needed_s: float) -> bool:
        return self.left() > needed_s


class OutOfTime(Exception):
    pass


@dataclass
class Result:
    """One measurement's Markdown file: a title, what ran, a table, notes and what was left."""

    name: str
    title: str
    commands: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # cases not run, each with why

    def markdown(self, device: dict) -> str:
        lines = [f"# {self.title}", "", f"Device: {device['summary']}", ""]
        if self.commands:
            lines += ["Commands:", "", *[f"    {c}" for c in self.commands], ""]
        if self.rows:
            lines += ["| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
            lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
            lines.append("")
        for note in self.notes:
            lines += [note, ""]
        if self.skipped:
            lines += ["Not run:", "", *[f"- {s}" for s in self.skipped], ""]
        return "\n".join(lines)


def device_info() -> dict:
    """The device as nvidia-smi and torch report it (the GPU issue asks for both)."""
    smi = None
    if shutil.which("nvidia-smi"):
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        smi = done.stdout.strip() or None
    import torch

    cuda = torch.cuda.is_available()
    name = torch.cuda.get_device_name(0) if cuda else f"CPU ({platform.processor() or platform.machine()})"
    summary = f"nvidia-smi: {smi or 'not available'}; torch {torch.__version__}: {name}" + (
        f", CUDA {torch.version.cuda}" if cuda else f", {os.cpu_count()} cores (dry run, not a GPU figure)"
    )
    return {"cuda": cuda, "name": name, "smi": smi, "torch": torch.__version__, "summary": summary}


def run(argv: list[str], budget: Budget, *, cwd: Path | None = None, env: dict | None = None, reserve_s: float = 5):
    """A subprocess bounded by what is left of the budget; OutOfTime when it would not fit or ran over."""
    limit = budget.left() - reserve_s
    if limit <= 1:
        raise OutOfTime(" ".join(argv[:4]))
    try:
        return subprocess.run(
            argv,
            cwd=cwd,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1", **(env or {})},
            capture_output=True,
            text=True,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        raise OutOfTime(" ".join(argv[:4])) from None


def rmspec(*args: str) -> list[str]:
    return [sys.executable, "-m", "rmspec", *args]


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())
