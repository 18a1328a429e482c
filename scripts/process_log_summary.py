"""Sum a test run's process log (tests/helpers/process_log, RMSPEC_TEST_PROCESS_LOG=FILE) by command and by
test module: how many Python processes the tests started, their wall and CPU seconds, and how many imported
torch (each such start costs seconds of imports before any work; bench/results/ci_durations.md).

    python scripts/process_log_summary.py FILE [--top 25]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def command(argv: list[str]) -> str:
    """`rmspec run`, `entrypoint.py`, `plan_calibration.py`, `vllm serve`, `-c`: what the process ran. `python -m
    rmspec` shows as rmspec/__main__.py, a `-m` module as its file: both are named by their package."""
    args = argv[1:]
    if not args or args[0] in ("-c", "-"):
        return "-c"
    path = Path(args[0])
    name = path.parent.name if path.name == "__main__.py" else path.name
    if name in ("rmspec", "vllm", "accelerate") and len(args) > 1 and not args[1].startswith("-"):
        return f"{name} {args[1]}"
    return name


def table(rows: dict[str, list[dict]], top: int) -> list[str]:
    lines = ["| what | processes | with torch | wall s | CPU s |", "|---|---:|---:|---:|---:|"]
    ranked = sorted(rows.items(), key=lambda item: -sum(r["cpu"] for r in item[1]))
    for key, records in ranked[:top]:
        lines.append(
            f"| `{key}` | {len(records)} | {sum(r['torch'] for r in records)} | "
            f"{sum(r['wall'] for r in records):.0f} | {sum(r['cpu'] for r in records):.0f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    records = [json.loads(line) for line in Path(args.log).read_text().splitlines() if line.strip()]
    by_command: dict[str, list[dict]] = defaultdict(list)
    by_module: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_command[command(record["argv"])].append(record)
        by_module[record["test"].split("::")[0] or "(outside a test)"].append(record)
    cpu = sum(r["cpu"] for r in records)
    print(f"{len(records)} processes, {sum(r['torch'] for r in records)} imported torch; CPU {cpu:.0f} s\n")
    print("\n".join(["By command:", "", *table(by_command, args.top), "", "By test module:", ""]))
    print("\n".join(table(by_module, args.top)))


if __name__ == "__main__":
    main()
