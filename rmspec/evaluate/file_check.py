"""The spec's benchmark files checked before any run: `validate`, `plan` and `run SPEC` ask here
whether each `eval.benchmarks[]` entry can be read, so that a missing or malformed file stops the
command (exit 2, at the entry's line in the spec, the benchmark file's line in the message) instead
of the run's evaluation after training.

Checked, for each entry: a kind that needs a file has one; a local path exists (relative to the
spec's folder, as the evaluation resolves it: rmspec.evaluate.loading.resolve_source); a local file
passes the row reader's guards (another format's magic bytes, bytes that do not decode, bare `null`
lines); and a JSON / JSON Lines file up to MAX_BYTES is read record by record: every record must
parse and be an object, and the records together must have the columns the kind's official schema
needs. A kind may name the files of a folder (BenchmarkKind.local_files: Long-RewardBench's folder
must hold its task files, each read as above). A hub id and other folders (RMB's, PRMBench's
released trees) are left to the evaluation, which reads every row and names the row of any problem.

Light: no torch, no datasets, no pyarrow (the kinds' modules import nothing heavy at import).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.errors import DataError, SpecError, SpecIssue
from rmspec.evaluate.loading import LOCAL_FORMATS, guard_file, resolve_source

# Files this small are read whole (about a second); larger ones are left to the evaluation.
MAX_BYTES = 50 * 2**20
HINT = "fix the file to the benchmark's released format, or point path at the released file"


def file_problem(kind: str, source: str, columns: tuple[str, ...]) -> DataError | None:
    """What keeps the evaluation from reading this local file, as a DataError naming FILE:LINE; None when
    it reads (or is too large, or not JSON, to read here)."""
    from rmspec import rows

    builder = LOCAL_FORMATS.get(Path(source).suffix.lower())
    if builder is None:
        return DataError(
            f"benchmark {kind!r}: cannot read {source}: unknown format {Path(source).suffix!r}",
            f"use one of {', '.join(sorted(LOCAL_FORMATS))}",
        )
    guard_file(kind, source, builder)  # raises the located DataError itself
    if builder != "json" or Path(source).stat().st_size > MAX_BYTES:
        return None
    seen: dict[str, None] = {}
    count = 0
    try:
        for row in rows.open_rows(source, "auto"):
            if row.error is not None or row.value is None:
                detail = row.error.detail if row.error is not None else "not a record"
                return DataError(f"benchmark {kind!r}: {source}:{row.line}: {detail}", HINT)
            seen.update(dict.fromkeys(row.value))
            count += 1
    except rows.RowError as exc:
        where = f"{source}:{exc.line}" if exc.line else source
        return DataError(f"benchmark {kind!r}: {where}: {exc.detail}", HINT)
    if not count:
        return DataError(f"benchmark {kind!r}: {source} has no rows", HINT)
    missing = [c for c in columns if c not in seen]
    if missing:
        return DataError(
            f"benchmark {kind!r}: {source} lacks column(s) {', '.join(missing)} (has: {', '.join(seen)})",
            f"the {kind} schema needs {', '.join(columns)}",
        )
    return None


def benchmark_issues(loaded: Any) -> list[SpecIssue]:
    """One located issue per `eval.benchmarks[]` entry whose file the evaluation could not read."""
    from rmspec.evaluate import registry

    benchmarks = getattr(getattr(loaded.spec, "eval", None), "benchmarks", None) or []
    issues = []
    for i, bench in enumerate(benchmarks):
        field: tuple[str | int, ...] = (
            ("eval", "benchmarks", i, "path") if bench.path is not None else ("eval", "benchmarks", i)
        )
        try:
            source, local = resolve_source(bench.kind, bench.path, Path(loaded.base_dir))
            kind = registry.get(bench.kind)
            files = kind.local_files(source) if local else []
            problems = (file_problem(bench.kind, f, tuple(kind.columns)) for f in files)
            problem = next((p for p in problems if p is not None), None)
        except DataError as exc:
            problem = exc
        if problem is not None:
            where = loaded.locations.find(field)
            issues.append(
                SpecIssue(".".join(map(str, field)), problem.message, where.file, where.line, where.col, problem.hint)
            )
    return issues


def check_benchmark_files(loaded: Any) -> None:
    """A SpecError (exit 2) listing every benchmark entry whose file cannot be read; nothing otherwise."""
    issues = benchmark_issues(loaded)
    if issues:
        raise SpecError(issues)
