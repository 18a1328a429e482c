"""Read a Label Studio export (JSON or JSON_MIN), validate every annotation, undo the A/B swap.

Label Studio validates nothing inside an annotation's `result` (REFERENCE.md section 6), so this
module does: a result under an unknown control name, a pairwise choice without `selected` or with
a value other than left/right, a tie choice other than "tie", both a choice and a tie, or a
rating off the scale makes that annotation invalid, with the reason; it is never guessed.

- JSON: a list of tasks, each with `data`, `meta` and `annotations[]` (`completed_by`, `was_cancelled`, `result[]`).
- JSON_MIN: one flat row per annotation (task `id`, the data fields, one key per control,
  `annotator`, `annotation_id`; a task without annotations has them null); it has no `meta`, which
  is why the tasks also carry `rmspec_id`/`rmspec_swap` in `data`. Measured on 1.23.2, it also
  leaves out cancelled annotations and any result under a control the config does not name, so
  JSON is the export to prefer: only there are cancellations counted and bad results named.

After parsing, a pairwise preference is "first" / "second" / "tie" in the SOURCE order (A/B swap undone).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmspec.annotate import kinds
from rmspec.annotate.records import ID_FIELD, KIND_FIELD, Annotation, Task
from rmspec.errors import DataError

EXPORT_HINT = (
    "export the project from Label Studio as JSON (Export > JSON, or GET /api/projects/ID/export?exportType=JSON) "
    "or JSON_MIN; its tasks must come from `rmspec annotate export`"
)


def load_export(path: str | Path) -> list[Task]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such export file", EXPORT_HINT)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f"{path}:{exc.lineno}:{exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(path)
        raise DataError(
            f"{where}: not a JSON file ({exc})", EXPORT_HINT + " (CSV and TSV exports cannot be read)"
        ) from None
    except RecursionError:  # found by tests/fuzz: thousands of nested brackets
        raise DataError(f"{path}: nested too deeply to be a Label Studio export", EXPORT_HINT) from None
    return parse_export(value, str(path))


def parse_export(value: Any, where: str = "<export>") -> list[Task]:
    if not isinstance(value, list):
        raise DataError(f"{where}: expected a JSON list of tasks, got {type(value).__name__}", EXPORT_HINT)
    if not value:
        return []
    if not all(isinstance(row, dict) for row in value):
        raise DataError(f"{where}: every element must be an object", EXPORT_HINT)
    if all(isinstance(row.get("data"), dict) for row in value):
        tasks = [_json_task(row) for row in value]
    elif any("data" in row for row in value):
        bad = next(i for i, row in enumerate(value) if not isinstance(row.get("data"), dict))
        raise DataError(f"{where}: element {bad} has no `data` object (a JSON export has one per task)", EXPORT_HINT)
    else:
        tasks = _json_min_tasks(value)
    if not any(t.error is None for t in tasks):
        raise DataError(
            f"{where}: none of its {len(tasks)} task(s) came from `rmspec annotate export` "
            f"(first problem: {tasks[0].error})",
            EXPORT_HINT,
        )
    return tasks


# ---------------------------------------------------------------- JSON


def _json_task(row: dict[str, Any]) -> Task:
    meta = row.get("meta") or {}
    if not isinstance(meta, dict):  # found by tests/fuzz: a list where the task's meta belongs
        task = Task(row.get("id"), "", "", row["data"])
        task.error = f"task {row.get('id')}: meta is a {type(meta).__name__}, expected an object"
        return task
    task = _task(row.get("id"), row["data"], meta)
    annotations = row.get("annotations") or []
    if not isinstance(annotations, list):  # found by tests/fuzz: a number or true where the list belongs
        task.error = f"task {row.get('id')}: annotations is a {type(annotations).__name__}, expected a list"
        return task
    for ann in annotations:
        if not isinstance(ann, dict):
            task.annotations.append(Annotation("?", error="annotation is not an object"))
            continue
        annotator = ann.get("completed_by")
        if isinstance(annotator, dict):  # older exports inline the user
            annotator = annotator.get("id", annotator.get("email"))
        record = Annotation(str(annotator), ann.get("id"), bool(ann.get("was_cancelled")))
        if not record.cancelled and task.error is None:
            _read_result(task, record, ann.get("result"))
        task.annotations.append(record)
    return task


# ---------------------------------------------------------------- JSON_MIN

MIN_RESERVED = {
    "id",
    "annotator",
    "annotation_id",
    "created_at",
    "updated_at",
    "lead_time",
    "agreement",
    "drafts",
    "predictions",
    "total_annotations",
    "cancelled_annotations",
    "total_predictions",
}


def _json_min_tasks(rows: list[dict[str, Any]]) -> list[Task]:
    tasks: dict[Any, Task] = {}
    for row in rows:
        key = row.get("id")
        if not isinstance(key, (str, int, float, bool, type(None))):  # found by tests/fuzz: a list as the id
            key = json.dumps(key, default=str)
        kind = row.get(KIND_FIELD)
        controls = _controls(kind, row)
        if key not in tasks:
            data = {k: v for k, v in row.items() if k not in MIN_RESERVED and k not in controls}
            tasks[key] = _task(key, data, {})
        task = tasks[key]
        if row.get("annotator") is None and row.get("annotation_id") is None:
            continue  # a task exported without annotations (download_all_tasks): annotator and id are null
        record = Annotation(str(row.get("annotator")), row.get("annotation_id"))
        if task.error is None:
            result = []
            for name in controls:
                result.extend(_min_to_result(name, row[name]))
            # Measured on 1.23.2: JSON_MIN leaves cancelled annotations out altogether and drops results
            # under a control name the config lacks, so such an annotation arrives empty and is rejected as empty.
            _read_result(task, record, result)
        task.annotations.append(record)
    return list(tasks.values())


def _controls(kind_name: Any, row: dict[str, Any]) -> list[str]:
    kind = kinds.get(kind_name)
    names = kind.controls(row) if kind else []  # no known kind: every column rmspec did not write is a result
    known = set(names) | MIN_RESERVED | {"prompt", "response", "response_a", "response_b"}
    # Any other key that is not a data field rmspec wrote is an unknown control: keep it so it is rejected.
    extra = [k for k in row if k not in known and not k.startswith("rmspec_")]
    return [n for n in names if n in row] + extra


def _min_to_result(name: str, value: Any) -> list[dict[str, Any]]:
    """JSON_MIN's compact value back into result items: dicts as they are, choices as strings."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            out.append({"from_name": name, "value": item})
        else:
            out.append({"from_name": name, "value": {"choices": [item]}})
    return out


# ---------------------------------------------------------------- shared


def _task(task_id: Any, data: dict[str, Any], meta: dict[str, Any]) -> Task:
    source_id = meta.get(ID_FIELD, data.get(ID_FIELD))
    kind = meta.get(KIND_FIELD, data.get(KIND_FIELD))
    task = Task(task_id, str(source_id) if source_id is not None else "", kind or "", data)
    task_kind = kinds.get(kind)
    if source_id is None or task_kind is None:
        task.error = (
            f"task {task_id} has no {ID_FIELD}/{KIND_FIELD} in meta or data: not made by `rmspec annotate export`"
        )
        return task
    # a kind not read yet (process) is still recognised, so the import can say it does not read it
    task_kind.check_task(task, meta)
    return task


def _read_result(task: Task, record: Annotation, result: Any) -> None:
    if not isinstance(result, list):
        record.error = f"result is {type(result).__name__}, expected a list"
        return
    # a kind not read yet (process) leaves the result unread: `annotate import` refuses such an export
    kinds.of(task.kind).read_result(task, record, result)
