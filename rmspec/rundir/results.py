"""RUN/results.json and the per-example JSONL files under RUN/eval: writing and reading.

results.json (schema_version 1):

    {"schema_version": 1, "created": ISO time, "model": path, "run": name | null,
     "benchmarks": {NAME: ENTRY, ...}, "validation": ENTRY | null,
     "reward_stats": {"mean", "std", "source"} | null, "notes": [...]}

ENTRY: {"kind", "source", "split", "overall" (0..1), "sections" {name: fraction},
"subsets" {name: fraction}, "counts" {subset: examples}, "num_examples", "details", "notes",
"per_example_path" (JSONL: id, subset and the scores), "diagnostics" {...}, "scorer" (the model
that wrote the rows: reward, judge or process; absent in files written before it was recorded)}.
Entries are computed in rmspec.evaluate.results; this module only stores them. Light: no torch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.rundir.layout import atomic_write_json, atomic_write_text

SCHEMA_VERSION = 1


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise RmspecError(
                        f"{path}:{number}: not valid JSON ({exc.msg})",
                        "the file was cut short or edited by hand; run `rmspec eval` again",
                    ) from None
    return rows


def new_results(model: str, run: str | None = None) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": model,
        "run": run,
        "benchmarks": {},
        "validation": None,
        "reward_stats": None,
        "notes": [],
    }


def write_results(path: Path, results: Mapping[str, Any]) -> None:
    atomic_write_json(path, results)


def read_results(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise RmspecError(f"{path} not found", "evaluate the run first: `rmspec eval RUN_DIR`")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RmspecError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})", "run `rmspec eval RUN_DIR` again to rewrite it"
        ) from None
    version = results.get("schema_version") if isinstance(results, dict) else None
    if not isinstance(results, dict) or version != SCHEMA_VERSION:
        raise RmspecError(
            f"{path}: schema_version {version!r}, this rmspec reads {SCHEMA_VERSION}",
            "re-run `rmspec eval RUN_DIR` with this version",
        )
    return results
