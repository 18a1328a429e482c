"""Hostile input: each row of issue 13's table, run as a user would, in a fresh process.

For each input: exit code, wall seconds, CPU seconds (user + system of the command's process) and
peak RSS, and whether a traceback reached the terminal. Writes bench/results/hostile_input.md.

    .venv/bin/python bench/hostile_input.py
"""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from helpers.hostile import ROWS, SPEC  # noqa: E402  (the same spec and rows as the tests)


def measure(args: list[str], cwd: Path) -> dict:
    usage = cwd / "usage.json"
    code = (
        "import atexit, json, resource, sys\n"
        "def _hwm():\n"
        "    return int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
        "def _u():\n"
        "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
        f"    open({str(usage)!r}, 'w').write(json.dumps([u.ru_utime + u.ru_stime, _hwm()]))\n"
        "atexit.register(_u)\n"
        "from rmspec.cli.main import main\n"
        f"sys.argv = ['rmspec', *{args!r}]\n"
        "main()\n"
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "NO_COLOR": "1",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "RMSPEC_CACHE_DIR": str(cwd / "cache"),
        },
    )
    wall = time.perf_counter() - t0
    cpu, rss = json.loads(usage.read_text())
    skip = ("Generating", "Map", "Filter", "error: 1 problem in the spec")
    first = next((line for line in proc.stderr.splitlines() if line.strip() and not line.startswith(skip)), "")
    first = first.replace(str(cwd) + "/", "")
    return {
        "code": proc.returncode,
        "wall": wall,
        "cpu": cpu,
        "rss_mb": rss / 1024,
        "traceback": "Traceback" in proc.stderr + proc.stdout,
        "says": first[:150],
    }


def main() -> None:
    out_rows = []
    with tempfile.TemporaryDirectory(prefix="rmspec-hostile-") as tmp:
        d = Path(tmp)
        lines = [json.dumps(r).encode() for r in ROWS]
        lines[2] = '{"prompt": "caf\u00e9?", "chosen": "un caf\u00e9", "rejected": "du th\u00e9"}'.encode("latin-1")
        (d / "latin1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        (d / "empty.jsonl").write_bytes(b"")
        rng = random.Random(0)
        (d / "binary.jsonl").write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
        for name in ("latin1", "empty", "binary"):
            (d / f"spec_{name}.yaml").write_text(SPEC.replace("DATA", f"{name}.jsonl"))
        (d / "nonutf8.yaml").write_bytes(SPEC.replace("name: t\n", "name: t\n# caf\u00e9\n").encode("latin-1"))
        bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        prev = "a"
        for c in "bcdefghi":
            bomb += f"{c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]\n"
            prev = c
        (d / "bomb.yaml").write_text(bomb)
        many_keys = "".join(f"key{i}: {i}\n" for i in range(200_000))
        (d / "keys.yaml").write_text(SPEC.replace("DATA", "x.jsonl") + many_keys)
        (d / "brackets.yaml").write_text(SPEC.replace("DATA", "x.jsonl") + "x: " + "[" * 5000 + "]" * 5000 + "\n")
        small = SPEC.replace("DATA", "x.jsonl")
        keys = "".join(f"k{i}: {i}\n" for i in range(20_000))
        (d / "max_nodes.yaml").write_text(small + keys[: 250 * 1024 - len(small)])
        cases = [
            ("JSONL with a Latin-1 byte: `data report`", ["data", "report", "spec_latin1.yaml", "--json"]),
            ("empty JSONL: `data report`", ["data", "report", "spec_empty.yaml"]),
            ("4 KiB of random bytes named .jsonl: `data report`", ["data", "report", "spec_binary.yaml"]),
            ("spec not in UTF-8: `validate`", ["validate", "nonutf8.yaml"]),
            (f"billion laughs ({len(bomb)} bytes): `validate`", ["validate", "bomb.yaml"]),
            (
                f"200,000 unknown keys ({(d / 'keys.yaml').stat().st_size / 1e6:.1f} MB): `validate`",
                ["validate", "keys.yaml"],
            ),
            ("5,000 nested brackets: `validate`", ["validate", "brackets.yaml"]),
            ("250 KiB of short keys (worst case within the size bound): `validate`", ["validate", "max_nodes.yaml"]),
        ]
        for what, args in cases:
            r = measure(args, d)
            if args[:2] == ["data", "report"] and r["code"] == 0:
                rep = json.loads(
                    subprocess.run(
                        [sys.executable, "-m", "rmspec", *args],
                        cwd=d,
                        capture_output=True,
                        text=True,
                        env={**os.environ, "HF_HUB_OFFLINE": "1", "RMSPEC_CACHE_DIR": str(d / "cache")},
                    ).stdout
                )
                t = rep["sources"]["train"]
                r["says"] = f"read {t['rows_read']}, kept {t['rows_kept']}, rejected {t['rejected']}"
            out_rows.append((what, r))
            print(what, r, flush=True)
    load = os.getloadavg()[0]
    text = [
        "# Hostile input (issue 13): each row of the issue's table, in a fresh process",
        "",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores shared with "
        f"other work, 1-min load average {load:.1f} at the end (wall time stretches with the load; CPU time "
        f"much less). Command: `.venv/bin/python bench/hostile_input.py`.",
        "",
        "Before (main at 029411d): Latin-1 row, empty and binary files: tracebacks, exit 1; non-UTF-8 spec: "
        "traceback, exit 1; billion laughs: still running after 20-60 s at 0.9-4.6 GB; 200,000 keys: still "
        "running after 20-60 s; 5,000 brackets: exit 2 after 5-12 s with 'maximum recursion depth exceeded'.",
        "",
        "| input | exit | wall s | CPU s | peak RSS MB | traceback | first line of the answer |",
        "|---|---|---|---|---|---|---|",
    ]
    for what, r in out_rows:
        says = r["says"].replace("|", "\\|")
        text.append(
            f"| {what} | {r['code']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss_mb']:.0f} | "
            f"{'yes' if r['traceback'] else 'no'} | {says} |"
        )
    out = REPO / "bench" / "results" / "hostile_input.md"
    out.write_text("\n".join(text) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
