"""The rows to label: a spec's data after mapping and filters, or a file of rows.

An item is a plain dict (from a spec's rows: each task kind's `item`, rmspec.annotate.kinds):

- pairwise: `id`, `group`, `prompt` (a string, or a list of {role, content} for a conversation),
  `first`, `second` (the two responses in source order) and `label`: "first" when the source
  already says which is better (chosen/rejected rows: chosen is first), None for unlabelled
  pairs (`response_a`/`response_b`);
- pointwise: `id`, `group`, `prompt`, `response`, `scores` (the source's, or None);
- process: `id`, `group`, `prompt`, `steps` (the reasoning steps, texts) and `step_labels` (the
  source's, 1 correct / 0 wrong, or None).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmspec import approaches, rows
from rmspec.annotate import kinds
from rmspec.annotate.kinds import PAIRWISE
from rmspec.annotate.kinds.base import TaskKind
from rmspec.errors import DataError

SPEC_SUFFIXES = (".yaml", ".yml")


class Source:
    """What `annotate export` labels: the items, their kind, and (pointwise) attributes and scale."""

    def __init__(
        self,
        kind: str,  # a task kind's name (rmspec.annotate.kinds)
        items: list[dict[str, Any]],
        attributes: list[str] | None = None,
        scale: tuple[float, float] | None = None,
        origin: str = "",
    ):
        self.kind = kind
        self.items = items
        self.attributes = attributes or []
        self.scale = scale
        self.origin = origin

    @property
    def task_kind(self) -> TaskKind:
        return kinds.of(self.kind)


def load_source(path: str | Path, sets: tuple[str, ...] = ()) -> Source:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file", "give a spec (.yaml) or a JSONL/JSON file of rows")
    if path.suffix in SPEC_SUFFIXES:
        return _from_spec(path, sets)
    return _from_rows(path)


def prompt_value(messages: list[dict[str, str]]) -> str | list[dict[str, str]]:
    """A single user turn as its text; a longer conversation as messages."""
    if len(messages) == 1 and messages[0].get("role") == "user":
        return messages[0]["content"]
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def exportable_approaches() -> list[str]:
    """The approaches whose rows make annotation tasks (the registry's order)."""
    return [name for name in approaches.names() if approaches.get(name).rows in kinds.BY_ROWS]


def _from_spec(path: Path, sets: tuple[str, ...]) -> Source:
    from rmspec.data import load_canonical
    from rmspec.spec import load_spec

    loaded = load_spec(path, sets)
    approach = loaded.spec.approach
    task = kinds.BY_ROWS.get(approach.row_kind)
    if task is None:
        raise DataError(
            f"{path}: approach {approach.kind} has no pairs, scores or steps to label",
            f"export from a {', '.join(exportable_approaches())} spec (pairs, scores, per-step labels), "
            "or from a file of pairs",
        )
    import datasets

    datasets.disable_progress_bars()
    rows, _ = load_canonical(loaded)
    items = []
    for row in rows:
        base = {
            "id": str(row["id"]),
            "group": row.get("group") or "",
            "prompt": prompt_value(row["prompt_messages"] or []),
        }
        items.append({**base, **task.item(row)})
    attributes, scale = task.rating(approach)
    return Source(task.name, items, attributes, scale, str(path))


def read_rows(path: Path) -> list[tuple[int, Any]]:
    """(line or item number, row) for each row of a file of rows, read by the one row reader
    (rmspec.rows: JSONL, a JSON array, CSV, Parquet; a name with another extension is read as
    JSONL). A row that is not an object comes as its value, for the caller to report with the
    others; a line that is not JSON, or not UTF-8, stops the export with its place."""
    fmt = "jsonl" if rows.format_of(path) is None else "auto"
    out: list[tuple[int, Any]] = []
    try:
        for row in rows.iter_rows(path, fmt):
            if row.error is None:
                out.append((row.line, row.value))
            elif row.error.code == rows.NOT_OBJECT:
                out.append((row.line, _not_object(row.raw)))
            else:
                raise row.error
    except rows.RowError as exc:
        raise _data_error(exc) from None
    return out


def _not_object(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:  # raw is cut at 2,000 characters: a longer value is an array or a string
        return [] if raw.startswith("[") else raw


def _data_error(exc: rows.RowError) -> DataError:
    if exc.code == rows.INVALID_JSON:
        document = exc.detail.startswith("not valid JSON")  # a JSON array: line and column; a JSONL line: its line
        return DataError(
            f"{exc.where if document else f'{exc.file}:{exc.line}'}: not valid JSON: {exc.msg}",
            "fix the file or write it as JSONL" if document else "one JSON object per line (JSONL)",
        )
    if exc.code == rows.NOT_ARRAY:
        return DataError(
            f"{exc.file}: expected a JSON list of rows, {exc.detail.split(', ')[-1]}", "write [ {...}, {...} ] or JSONL"
        )
    return DataError(str(exc), "give a spec (.yaml) or a JSONL/JSON file of rows (UTF-8)")


def _from_rows(path: Path) -> Source:
    items: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, row in read_rows(path):
        where = f"{path}:{number}"
        if not isinstance(row, dict):
            problems.append(f"{where}: expected an object, got {type(row).__name__}")
            continue
        try:
            items.append(_pair_item(row, len(items)))
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    if problems:
        shown = "\n  ".join(problems[:10]) + (f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise DataError(
            f"{len(problems)} row(s) of {path} cannot be labelled:\n  {shown}",
            "each row needs prompt and either chosen/rejected (labelled) or response_a/response_b (unlabelled)",
        )
    if not items:
        raise DataError(f"{path}: no rows", "the file must hold at least one pair")
    ids = [it["id"] for it in items]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(
            f"{path}: row id {dup!r} appears more than once", "ids must be unique: the import joins labels back by id"
        )
    return Source(PAIRWISE, items, origin=str(path))


def _pair_item(row: dict[str, Any], index: int) -> dict[str, Any]:
    if "chosen" in row or "rejected" in row:
        first, second, label = row.get("chosen"), row.get("rejected"), "first"
        names = ("chosen", "rejected")
    elif "response_a" in row or "response_b" in row:
        first, second, label = row.get("response_a"), row.get("response_b"), None
        names = ("response_a", "response_b")
    else:
        raise ValueError(f"no chosen/rejected or response_a/response_b field (fields: {', '.join(row) or 'none'})")
    for name, value in zip(names, (first, second)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be a non-empty string, got {value!r:.60}")
    prompt = row.get("prompt", "")
    if isinstance(prompt, list):
        if not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt
        ):
            raise ValueError("prompt as a list must hold {role, content} messages")
    elif not isinstance(prompt, str):
        raise ValueError(f"prompt must be a string or a list of messages, got {type(prompt).__name__}")
    # Scalar columns ride along so --stratify can name any of them (subset, family, source...).
    fields = {
        k: v for k, v in row.items() if isinstance(v, (str, int, float, bool)) and k not in names and k != "prompt"
    }
    return {
        "id": str(row.get("id", f"row-{index}")),
        "group": str(row.get("group", row.get("family", "")) or ""),
        "prompt": prompt,
        "first": first,
        "second": second,
        "label": label,
        "fields": fields,
    }
