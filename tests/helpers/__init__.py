"""Helpers the test modules share: tiny models, specs, run directories, real servers.

Test modules import from here, never from one another (changing one test file must not break
others). The modules are plain code, not tests: pytest collects nothing under helpers/.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The small benchmark files the eval, score and serve tests score (tests/fixtures/benchmarks/).
BENCHMARKS = REPO / "tests" / "fixtures" / "benchmarks"
