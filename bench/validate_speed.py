"""How long `rmspec validate specs/hh_bt.yaml` takes: a cold CLI process, and load_spec in-process.

Run: .venv/bin/python bench/validate_speed.py  (writes bench/results/validate.md)
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "specs" / "hh_bt.yaml"


def cold_cli(n: int = 7) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rmspec", "validate", str(SPEC)], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def python_startup(n: int = 7) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return times


def in_process(n: int = 50) -> list[float]:
    from rmspec.spec import load_spec

    load_spec(SPEC)  # warm imports
    times = []
    for _ in range(n):
        start = time.perf_counter()
        load_spec(SPEC)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    cli, bare, warm = cold_cli(), python_startup(), in_process()
    lines = [
        "# `rmspec validate specs/hh_bt.yaml`",
        "",
        f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, 1-min load average {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| what | median | min | max |",
        "|---|---|---|---|",
    ]
    for name, xs in (
        ("cold CLI process (python -m rmspec validate)", cli),
        ("bare `python -c pass` for comparison", bare),
        ("load_spec in a warm process", warm),
    ):
        lines.append(
            f"| {name} | {statistics.median(xs) * 1000:.0f} ms | {min(xs) * 1000:.0f} ms | {max(xs) * 1000:.0f} ms |"
        )
    text = "\n".join(lines) + "\n"
    out = REPO / "bench" / "results" / "validate.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
