"""How fast `rmspec plan` answers, and that it stays light (no torch/transformers/datasets/accelerate).

    python bench/plan_speed.py   # -> bench/results/plan_speed.md

Each row is the median of 5 fresh processes running the CLI end to end (interpreter start,
imports, spec load, planning, rendering), as a user would type it.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 5


def wall(args: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rmspec", *args], cwd=REPO, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def heavy_modules() -> str:
    code = (
        "import sys; from rmspec.cli.main import cli; "
        "cli.main(['plan', 'specs/ultrafeedback_bt.yaml', '--json'], standalone_mode=False); "
        "print([m for m in ('torch', 'transformers', 'datasets', 'accelerate') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    floor = statistics.median(
        [
            (lambda s: (subprocess.run([sys.executable, "-c", "pass"], check=True), time.perf_counter() - s)[1])(
                time.perf_counter()
            )
            for _ in range(RUNS)
        ]
    )
    results = [("python -c pass (interpreter floor)", floor)]
    for spec in sorted((REPO / "specs").glob("*.yaml")):
        results.append((f"rmspec plan specs/{spec.name}", wall(["plan", f"specs/{spec.name}"])))
    results.append(
        ("rmspec plan specs/ultrafeedback_bt.yaml --json", wall(["plan", "specs/ultrafeedback_bt.yaml", "--json"]))
    )
    lines = [
        "# `rmspec plan` speed",
        "",
        f"`python bench/plan_speed.py`: median wall time of {RUNS} fresh processes (2 shared CPU cores).",
        "",
        "| command | seconds |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {seconds:.3f} |" for name, seconds in results]
    lines += ["", f"Heavy modules imported by a plan: {heavy_modules()}"]
    (REPO / "bench" / "results" / "plan_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
