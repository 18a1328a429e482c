"""Shared test helpers: run the CLI in-process the way a user's shell would."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# The shared helpers (tests/helpers/) assert too: rewrite their asserts as pytest does the tests'.
pytest.register_assert_rewrite("helpers")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
# One OpenMP thread for the tests and every command they start (set before torch is imported): `make test` runs
# two workers on two cores, each worker and each `rmspec run` it starts would take torch's default of a thread
# per core, and OpenMP threads that spin while waiting stall one another on oversubscribed cores (REFERENCE 16).
# Measured, 6 modules (86 tests) on two workers, loaded host: 418 s and 429 s with torch's default, 89 s and
# 192 s with one thread; user CPU 114-117 s against 45-49 s (bench/results/ci_durations.md).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# vLLM's CPU engine in two processes (API server, engine core running the model) instead of three: its
# engine core otherwise starts a worker process of its own, whose imports are a third of each start
# (43 -> 29 s to /health, bench/results/ci_durations.md). vLLM keeps the separate worker on a CPU to bind
# OpenMP threads to cores, which the tests' one-thread engines do not need.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
if os.environ.get("RMSPEC_TEST_PROCESS_LOG"):
    # Each Python process the tests start logs its command and seconds (tests/helpers/process_log).
    _log_site = str(Path(__file__).parent / "helpers" / "process_log")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_log_site, os.environ.get("PYTHONPATH")]))
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # A suite started in the background by a script (`make test &`, a shell without job control) ignores
    # SIGINT, and every command the tests start would inherit that: `rmspec run` would never see the Ctrl-C
    # the interrupt tests send it (they timed out so). A handler is reset to the default in a child (exec),
    # an ignored signal is not, so this makes each command start as a terminal's foreground job does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # An xdist worker starts with COLUMNS=80 and LINES=24, which one process does not have; the commands the
    # tests start in a pipe would take them for the terminal's width (test_compare_in_a_pipe_...).
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"


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
