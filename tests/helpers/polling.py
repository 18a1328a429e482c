"""Waiting on a run in a subprocess: poll a condition, fail fast if the run ends first."""

from __future__ import annotations

import subprocess
import time


def _wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError("the run ended before the condition: " + (proc.stdout.read() or ""))
        time.sleep(0.02)
    raise AssertionError("timed out")
