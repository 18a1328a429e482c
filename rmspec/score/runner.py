"""Score a file: bounded chunks, length-sorted batches inside each, rows written in input order.

Memory stays bounded by `chunk_rows` whatever the file size: a chunk is read, encoded, scored in
batches of similar length (the engine sorts inside the call), written, and dropped. What is scored
is the scorer kind's (rmspec.inference.scorers): rewards, pointwise outputs, a judge's verdicts,
a process model's per-step scores, a composite's reward and components.

The padding share (pad tokens / tokens in the batches) is counted for one sequence per text in
length-sorted batches of `batch_size`: what the engine computes for encoders. A decoder that
computes each prompt once (RewardEngine.prompt_once) computes fewer positions than that, so there
the share describes the batching without prompt sharing, not what ran.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.inference import scorers
from rmspec.inference.scorers import shapes
from rmspec.inference.scorers.base import Rejected
from rmspec.score import output, reader
from rmspec.score.reader import BadRow


def score_file(
    engine: Any,
    input_path: str | Path,
    out: Path,
    *,
    target: str,
    columns: str | None = None,
    split: str | None = None,
    chunk_rows: int = 2048,
    batch_size: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    allow_image_urls: bool = False,
    progress: Callable[[int, int | None], None] | None = None,
) -> dict[str, Any]:
    """Score every row of `input_path` into `out`; returns the summary (counts reconcile:
    rows_read == scored + rejected, resumed rows included)."""
    started = time.perf_counter()
    named = shapes.parse_columns(columns)
    output.out_format(out)
    in_path = Path(input_path).resolve()
    identity = {"input": str(in_path), "model": str(Path(target).resolve()), "columns": columns or ""}
    state = _prepare_out(out, identity, resume, overwrite)
    if state is not None and state.get("done"):
        return _summary(state, out, in_path, started, 0, 0, 0, resumed=state["rows_done"], already=True)
    skip = state["rows_done"] if state else 0
    source = reader.open_rows(in_path, split=split, skip=skip)
    rows = iter(source.rows)
    if state and state.get("shape"):  # a resumed run keeps the shape it started with
        shape = shapes.Shape(state["shape"]["kind"], state["shape"]["columns"])
    else:
        first = next((r for r in rows if not isinstance(r, BadRow)), None)
        if first is None:
            raise DataError(f"{input_path}: no row to score", "the file is empty, or no line is a JSON object")
        shape = scorers.of(engine).shape(engine, list(first), named)  # a PRM: prompt + steps; a judge: pairs
        rows = iter(reader.open_rows(in_path, split=split, skip=skip).rows)  # the peek consumed rows: read again
    shape.base_dir = str(in_path.parent)  # relative image paths (a vision reward model's images column)
    shape.allow_image_urls = allow_image_urls
    writer = output.Writer(out, resume_state=state, identity=identity)
    writer.state["shape"] = {"kind": shape.kind, "columns": shape.columns}
    bs = batch_size or engine.batch_size
    real = padded = 0
    index = skip
    total = source.total
    if progress:
        progress(skip, total)
    while True:
        chunk = list(itertools.islice(rows, chunk_rows))
        if not chunk:
            break
        scored, rejects, (r, p) = _score_chunk(engine, shape, chunk, index, bs)
        real, padded = real + r, padded + p
        writer.write(scored, rejects, len(chunk))
        index += len(chunk)
        if progress:
            progress(index, total)
    writer.finish()
    summary = _summary(writer.state, out, in_path, started, index - skip, real, padded, resumed=skip)
    summary["shape"] = shape.describe()
    summary.update(scorers.of(engine).summary(engine))  # a composite: failures per component and reason
    return summary


def _prepare_out(out: Path, identity: dict[str, Any], resume: bool, overwrite: bool) -> dict[str, Any] | None:
    files = [out, output.rejects_path(out), output.progress_path(out)]
    if resume:
        state = output.load_resume(out, identity)
        if state is None and out.exists():  # a finished run removed its record: the output is complete
            return output.finished_state(out)
        return state
    if any(f.exists() for f in files):
        if not overwrite:
            raise DataError(
                f"{out} already exists", "continue an interrupted run with --resume, or replace it with --overwrite"
            )
        for f in files:
            f.unlink(missing_ok=True)
    return None


Chunk = tuple[list[dict[str, Any]], list[dict[str, Any]], tuple[int, int]]


def _score_chunk(engine: Any, shape: shapes.Shape, chunk: list[Any], first_index: int, batch_size: int) -> Chunk:
    """(scored rows, rejects, (real tokens, tokens in the batches)) of one chunk, scored by the
    engine's kind: rows it cannot read and rows it cannot score go to the rejects, in that order."""
    kind = scorers.of(engine)
    kept: list[tuple[int, dict[str, Any], Any]] = []
    rejects = []
    for k, row in enumerate(chunk):
        i = first_index + k
        if isinstance(row, BadRow):
            rejects.append(_reject(i, row.reason, row.kind, row.raw))
            continue
        item = kind.item(engine, row, shape)
        if isinstance(item, Rejected):
            rejects.append(_reject(i, item.reason, item.reason_kind, row))
        else:
            kept.append((i, row, item))
    cols, padding = kind.score(engine, shape, [item for _, _, item in kept], batch_size)
    scored = []
    for (i, row, _), c in zip(kept, cols):
        if isinstance(c, Rejected):  # a composite row whose reward failed, with its components' values
            rejects.append({**_reject(i, c.reason, c.reason_kind, row), **c.columns})
        else:
            scored.append(_add(row, c))
    return scored, rejects, padding


def _add(row: dict[str, Any], cols: dict[str, Any]) -> dict[str, Any]:
    """The input row, every column in its order, then the scores (prefixed if a name is taken)."""
    out = dict(row)
    for name, value in cols.items():
        out[name if name not in row else f"rmspec_{name}"] = value
    return out


def _reject(index: int, reason: str, kind: str, data: Any) -> dict[str, Any]:
    """A rejects-file row: `reason` says what and where, `kind` is what the summary counts."""
    return {"row": index, "reason": reason, "reason_kind": kind, "input": data}


def _summary(
    state: dict[str, Any],
    out: Path,
    in_path: Path,
    started: float,
    rows_now: int,
    real: int,
    padded: int,
    *,
    resumed: int,
    already: bool = False,
) -> dict[str, Any]:
    seconds = time.perf_counter() - started
    return {
        "input": str(in_path),
        "out": str(out),
        "rejects": str(output.rejects_path(out)) if state["rejected"] else None,  # no file when none was rejected
        "rows_read": state["rows_done"],
        "scored": state["scored"],
        "rejected": state["rejected"],
        "rejected_by_reason": dict(state["reasons"]),
        "resumed_from_row": resumed,
        "rows_this_run": rows_now,
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows_now / seconds, 2) if seconds > 0 and rows_now else None,
        "padding_share": round(1 - real / padded, 4) if padded else None,
        "already_complete": already,
    }
