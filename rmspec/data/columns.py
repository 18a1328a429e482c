"""Helpers on `datasets` objects whose rows carry a reject mark (reject_stage/reason/detail):
column access in one Arrow take, the kept and the rejected rows, the output columns, the rejects
file, streams written to Arrow, the number of processes, the stable hash of fingerprints."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from rmspec.spec.row_kinds import RowKind

PARALLEL_FROM_ROWS = 100_000  # below this, extra processes cost more than they save

OUTPUT_COLUMNS: dict[str, list[str]] = {
    RowKind.PAIRS: [
        "id",
        "group",
        "augmented",
        "prompt",
        "chosen",
        "rejected",
        "margin",
        "chosen_input_ids",
        "rejected_input_ids",
        "chosen_token_type_ids",
        "rejected_token_type_ids",
        "tie",
        "prompt_messages",  # the conversation as written: a GRPO judge's prompt quotes it
    ],
    RowKind.LIST: [
        "id",
        "group",
        "augmented",
        "prompt",
        "responses",
        "scores",
        "responses_input_ids",
        "responses_token_type_ids",
        "length",
    ],
    RowKind.SCORED: ["id", "group", "augmented", "prompt", "response", "scores", "input_ids", "token_type_ids"],
    RowKind.MESSAGES: ["id", "group", "augmented", "messages", "input_ids", "labels"],
    RowKind.STEPS: [
        "id",
        "group",
        "augmented",
        "prompt",
        "steps",
        "step_labels",
        "input_ids",
        "labels",
        "token_type_ids",
        "prompt_messages",  # the conversation as written: `rmspec export --to vllm --check` scores it again
    ],
}


def mark_indices(batch: dict[str, list], indices: list[int], drop: set[int], stage: str, reason: str, detail: str):
    for j, i in enumerate(indices):
        if i in drop:
            batch["reject_stage"][j], batch["reject_reason"][j], batch["reject_detail"][j] = stage, reason, detail
    return batch


def alive(ds: Any) -> Any:
    return ds.filter(
        lambda rs: [not r for r in rs],
        input_columns=["reject_reason"],
        batched=True,
        new_fingerprint=stable_hash(ds._fingerprint, "alive"),
    )


def rejected(ds: Any) -> Any:
    return ds.filter(
        lambda rs: [bool(r) for r in rs],
        input_columns=["reject_reason"],
        batched=True,
        new_fingerprint=stable_hash(ds._fingerprint, "rejected"),
    )


def output(ds: Any, approach: str, keep_source: bool = False) -> Any:
    """The columns training reads; a mixture's rows keep their dataset's name (`source`) for the
    per-source figures of validation. Rows with images keep their references (rmspec.vision.rows) for
    the VLM collator."""
    wanted = [*OUTPUT_COLUMNS[approach], "images", *(["source"] if keep_source else [])]
    keep = [c for c in wanted if c in ds.column_names]
    return ds.select_columns(keep)


def write_rejects(path: str | Path, parts: list[tuple[str, Any]]) -> int:
    """JSONL, one line per rejected row: source, source_index, id, stage, reason, detail, row."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    skip = {"reject_stage", "reject_reason", "reject_detail", "raw", "source_index", "prompt_key", "id", "source"}
    with path.open("w", encoding="utf-8") as fh:
        for name, ds in parts:
            for batch in ds.iter(batch_size=1000):
                for j in range(len(batch["id"])):
                    raw = batch["raw"][j]
                    row = (
                        json.loads(raw)
                        if raw
                        else {
                            k: v[j]
                            for k, v in batch.items()
                            if k not in skip
                            and not k.endswith("input_ids")
                            and not k.endswith("token_type_ids")
                            and k != "labels"
                        }
                    )
                    fh.write(
                        json.dumps(
                            {
                                "source": name,
                                "source_index": batch["source_index"][j],
                                "id": batch["id"][j],
                                "stage": batch["reject_stage"][j],
                                "reason": batch["reject_reason"][j],
                                "detail": batch["reject_detail"][j],
                                "row": row,
                            },
                            ensure_ascii=False,
                            default=str,
                        )
                        + "\n"
                    )
                    n += 1
    return n


def first_details(parts: list[tuple[str, Any]]) -> dict[str, str]:
    """The first rejected row's detail for each reason, on one line (what an error shows of the rejects file)."""
    found: dict[str, str] = {}
    for _name, ds in parts:
        for reason, detail in zip(column(ds, "reject_reason"), column(ds, "reject_detail"), strict=True):
            found.setdefault(reason, " ".join(str(detail).split())[:160])
    return found


def count_sources(ds: Any) -> int:
    seen = column(ds, "source_index")
    return (max(seen) + 1) if seen else 0


def column(ds: Any, name: str) -> list:
    """One column as a Python list, read in one Arrow take (row-by-row access is far slower)."""
    return arrow(ds, name).to_pylist()


def arrow(ds: Any, name: str) -> Any:
    """One column as an Arrow ChunkedArray (the dataset's row selection applied)."""
    import pyarrow as pa

    indices = getattr(ds, "_indices", None)  # the row selection left by filter/select
    if hasattr(ds, "data") and (indices is None or isinstance(indices, pa.Table) or hasattr(indices, "column")):
        # One Arrow take. datasets' own path gathers one single-row slice per row, which costs
        # about a kilobyte a row and minutes on a million rows.
        col = ds.data.column(name)
        return col if indices is None else col.take(indices.column(0))
    col = ds.with_format("arrow")[name]
    return col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col], type=col.type)


def numbers(ds: Any, name: str) -> Any:
    """A numeric or boolean column as a numpy array."""
    return arrow(ds, name).to_numpy()


def materialise(iterable: Any, features: Any, folder: Path) -> Any:
    """Write a mapped stream to one Arrow file in batches (bounded memory) and memory-map it."""
    import datasets
    from datasets.arrow_writer import ArrowWriter

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("stream-*.arrow"):  # left by earlier runs; a day is longer than any run
        if time.time() - old.stat().st_mtime > 86400:
            old.unlink(missing_ok=True)
    path = folder / f"stream-{os.getpid()}-{os.urandom(6).hex()}.arrow"
    with ArrowWriter(features=features, path=str(path)) as writer:
        for batch in iterable.iter(batch_size=1000):
            writer.write_batch(batch)
        writer.finalize()
    return datasets.Dataset.from_file(str(path))


def procs(rows: int, setting: int | None = None) -> int | None:
    """datasets' num_proc for a stage over `rows`: data.num_proc when set (1 is None: in this process), else
    one process below PARALLEL_FROM_ROWS and up to 8 above."""
    if setting is not None:
        return setting if setting > 1 else None
    if rows < PARALLEL_FROM_ROWS:
        return None
    return max(1, min(8, os.cpu_count() or 1)) or None


def stable_hash(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:32]
