"""Waiting on a run in a subprocess: poll a condition, fail fast if the run ends first; start a run and
kill its trainer once a checkpoint is complete (the resume tests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError("the run ended before the condition: " + (proc.stdout.read() if proc.stdout else ""))
        time.sleep(0.02)
    raise AssertionError("timed out")


def start_run(spec: Path, cwd: Path) -> subprocess.Popen:
    """`rmspec run SPEC` in the background, offline, its output kept for a failure's message."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "rmspec", "run", str(spec)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def kill_trainer(run: Path) -> None:
    """SIGKILL a run's trainer (status.json's pid) with the processes of its session, if it still runs: for a
    test's cleanup. The trainer has a session of its own (rmspec.launch.local), so killing `rmspec run` leaves
    it training; a failed interrupt test once left one at full CPU for the rest of the suite."""
    try:
        group = os.getpgid(json.loads((run / "status.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):  # no status yet, or the trainer is gone
        return
    if group != os.getpgrp():  # never the tests' own group
        os.killpg(group, signal.SIGKILL)


def kill_trainer_at_checkpoint(spec: Path, cwd: Path, run: Path, step: int, timeout: float = 300) -> int:
    """Start `rmspec run SPEC`, SIGKILL its trainer (rank 0, status.json's pid; not the parent) once
    RUN/checkpoints/checkpoint-STEP is complete, and return the parent's exit code."""
    proc = start_run(spec, cwd)
    try:
        _wait_for(lambda: (run / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json").exists(), timeout, proc)
        os.kill(json.loads((run / "status.json").read_text())["pid"], signal.SIGKILL)
        return proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_trainer(run)
