"""What a loaded benchmark holds, and reading it: the hub id or a local file in the official schema.

Every benchmark kind (rmspec.evaluate.kinds) turns its rows into a list of `Example` (a prompt
and the responses to score, in the order its scoring rule needs). `datasets` is imported inside
`load_rows` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.spec.benchmarks import CATALOGUE, kind_names

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


@dataclass
class Example:
    id: str
    subset: str
    prompt: str | list[dict[str, str]]  # text, or chat messages before the response
    responses: list[str]  # in the order the kind's per-example rows expect
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchmarkData:
    kind: str
    source: str  # the file or hub id it came from
    split: str | None
    examples: list[Example]
    notes: list[str] = field(default_factory=list)  # rows that could not be read, and why


def unknown_kind(kind: str) -> DataError:
    return DataError(f"unknown benchmark {kind!r}", f"choose one of: {', '.join(kind_names())}")


def resolve_source(kind: str, path: str | None, base_dir: Path | None = None) -> tuple[str, bool]:
    """(path or hub id, is_local). A relative path resolves against base_dir (the spec's folder)."""
    if kind not in CATALOGUE:
        raise unknown_kind(kind)
    if path is None:
        default = CATALOGUE[kind].hub
        if default is None:
            raise DataError(
                f"benchmark {kind!r} needs a file",
                "give its path (eval.benchmarks[].path in the spec, or --path FILE), a JSONL/JSON/Parquet file with prompt, chosen, rejected",
            )
        return default, False
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and base_dir is not None and (base_dir / candidate).exists():
        candidate = base_dir / candidate
    if candidate.exists():
        return str(candidate.resolve()), True
    looks_local = candidate.suffix in LOCAL_FORMATS or path.startswith((".", "/", "~")) or path.count("/") != 1
    if looks_local:
        where = f" (looked in {base_dir})" if base_dir is not None and not Path(path).is_absolute() else ""
        raise DataError(
            f"benchmark {kind!r}: file not found: {path}{where}",
            "check the path; relative paths resolve against the spec file's folder",
        )
    return path, False


def guard_file(kind: str, source: str, builder: str) -> None:
    """The row reader's guards (rmspec.rows.preflight) before datasets/pyarrow reads a local file:
    another format's magic bytes, bytes that do not decode, a bare `null` line (which crashes
    pyarrow's JSON reader); pyarrow would let them through to fail later as a traceback."""
    from rmspec.rows import BARE_NULL, ENCODING, RowError, preflight

    try:
        preflight(source, builder)
    except RowError as exc:
        hint = {
            ENCODING: "convert the file to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)",
            BARE_NULL: "remove the null lines",
        }
        raise DataError(
            f"benchmark {kind!r}: {exc.where}: {exc.detail}",
            hint.get(exc.code, f"use a {builder} file, or rename it to its real format"),
        ) from None


def load_rows(
    kind: str, source: str, local: bool, split: str | None, columns: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], str | None]:
    """The rows of a local file (any split) or of a hub dataset's split (default: the kind's
    official one), checked for the official schema's `columns`."""
    import datasets

    default_split = CATALOGUE[kind].split
    try:
        if local and Path(source).is_file():
            builder = LOCAL_FORMATS.get(Path(source).suffix.lower())
            if builder is None:
                raise DataError(
                    f"benchmark {kind!r}: cannot read {source}: unknown format {Path(source).suffix!r}",
                    f"use one of {', '.join(sorted(LOCAL_FORMATS))}",
                )
            guard_file(kind, source, builder)
            dataset = datasets.load_dataset(builder, data_files=source, split="train")
            used_split = None
        else:
            used_split = split or default_split
            dataset = datasets.load_dataset(source, split=used_split)
    except DataError:
        raise
    except Exception as exc:  # the hub offline, a missing split, a malformed file
        raise DataError(
            f"benchmark {kind!r}: cannot load {source}"
            + (f" (split {split or default_split})" if not local else "")
            + f": {exc}",
            "offline, point --path (or the spec's path) at a local JSON/JSONL/Parquet file in the benchmark's official schema",
        ) from None
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise DataError(
            f"benchmark {kind!r}: {source} lacks column(s) {', '.join(missing)} (has: {', '.join(dataset.column_names)})",
            f"the {kind} schema needs {', '.join(columns)}",
        )
    return dataset.to_list(), used_split


def as_text_list(value: Any, what: str, where: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise DataError(
            f"{where}: {what} must be a list of responses, got {type(value).__name__}",
            "use the benchmark's official schema",
        )
    return [str(v) for v in value]
