"""Shared test helpers: run the CLI in-process the way a user's shell would."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# The shared helpers (tests/helpers/) assert too: rewrite their asserts as pytest does the tests'.
pytest.register_assert_rewrite("helpers")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"

# `make test` runs the suite on two workers (pytest-xdist, `--dist loadgroup`). Each test module is one
# group, so its module-scoped fixtures (a trained run, a started vLLM engine) are built once, on one
# worker. The modules that drive the SLURM test cluster share a group: the cluster's daemons listen on
# fixed ports, so one worker starts it (a session fixture) and runs them all.
SHARED_GROUPS = {
    "test_slurm_submit.py": "slurm",
    "test_slurm_sweep.py": "slurm",
    "test_slurm_train.py": "slurm",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.name
        item.add_marker(pytest.mark.xdist_group(SHARED_GROUPS.get(module, str(item.path.relative_to(REPO)))))


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Call `rmspec ARGS...` through rmspec.cli.main.main; returns exit code, stdout, stderr."""

    def run(*args: str) -> CliResult:
        from rmspec.cli.main import main

        monkeypatch.setattr(sys, "argv", ["rmspec", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
