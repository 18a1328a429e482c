"""Score a file: bounded chunks, length-sorted batches inside each, rows written in input order.

Memory stays bounded by `chunk_rows` whatever the file size: a chunk is read, encoded, scored in
batches of similar length (the engine sorts inside the call), written, and dropped. The padding
share (pad tokens / tokens computed) is counted the way the engine batches, for the benchmark.
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path
from typing import Any, Callable

from rmspec.errors import DataError
from rmspec.inference.engine import JUDGE, POINTWISE, RewardEngine, preference_probability
from rmspec.score import output, reader, shapes
from rmspec.score.reader import BadRow


def score_file(engine: RewardEngine, input_path: str | Path, out: Path, *, target: str, columns: str | None = None,
               split: str | None = None, chunk_rows: int = 2048, batch_size: int | None = None, resume: bool = False,
               overwrite: bool = False, progress: Callable[[int, int | None], None] | None = None) -> dict[str, Any]:
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
        if engine.kind == "process":  # a PRM: prompt + steps (rmspec.score.steps)
            from rmspec.score.steps import step_shape

            shape = step_shape(list(first), named)
        else:
            shape = shapes.detect(list(first), named)
        rows = iter(reader.open_rows(in_path, split=split, skip=skip).rows)  # the peek consumed rows: read again
    if engine.kind == JUDGE and shape.kind != shapes.PAIRS:
        raise DataError(f"a generative judge compares two responses; these rows are {shape.kind}",
                        "give prompt + chosen + rejected rows (--columns prompt=..,chosen=..,rejected=..)")
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
    return summary


def _prepare_out(out: Path, identity: dict[str, Any], resume: bool, overwrite: bool) -> dict[str, Any] | None:
    files = [out, output.rejects_path(out), output.progress_path(out)]
    if resume:
        state = output.load_resume(out, identity)
        if state is None and out.exists():
            raise DataError(f"--resume: {out} exists but has no progress record ({output.progress_path(out).name})",
                            "it was not written by rmspec score; start afresh with --overwrite")
        return state
    if any(f.exists() for f in files):
        if not overwrite:
            raise DataError(f"{out} already exists", "continue an interrupted run with --resume, or replace it with --overwrite")
        for f in files:
            f.unlink(missing_ok=True)
    return None


def _score_chunk(engine: RewardEngine, shape: shapes.Shape, chunk: list[Any], first_index: int, batch_size: int):
    if engine.kind == "process":  # per-step scores and the predicted first wrong step
        from rmspec.score.steps import score_step_chunk

        return score_step_chunk(engine, shape, chunk, first_index, _reject, _add)
    kept: list[tuple[int, dict[str, Any], list[tuple[Any, str]]]] = []
    rejects = []
    for k, row in enumerate(chunk):
        i = first_index + k
        if isinstance(row, BadRow):
            rejects.append(_reject(i, row.reason, row.raw))
            continue
        try:
            kept.append((i, row, shape.items(row)))
        except shapes.Reject as exc:
            rejects.append(_reject(i, str(exc), row))
    items = [item for _, _, its in kept for item in its]
    if engine.kind == JUDGE:
        judged = engine.verdicts([its[0][0] for _, _, its in kept], [its[0][1] for _, _, its in kept],
                                 [its[1][1] for _, _, its in kept], batch_size)
        return [_add(row, {"verdict": v, "judge_output": text}) for (_, row, _), (v, text) in zip(kept, judged)], rejects, (0, 0)
    encoded = engine.encode(items)
    groups, pos = [], 0
    for _, _, its in kept:  # a row's texts share its prompt: computed once on decoders (engine.prompt_once)
        groups.append(encoded[pos:pos + len(its)])
        pos += len(its)
    outputs = engine.grouped_outputs(groups, batch_size)
    rows = [_add(row, _columns(engine, shape, outs, enc)) for (_, row, _), outs, enc in zip(kept, outputs, groups)]
    return rows, rejects, _padding([len(e.ids) for e in encoded], batch_size)


def _columns(engine: RewardEngine, shape: shapes.Shape, outs: list[list[float]], enc: list[Any]) -> dict[str, Any]:
    truncated = any(e.truncated for e in enc)
    if engine.kind == POINTWISE:
        if shape.kind == shapes.PAIRS:
            cols = {f"{name}_{side}": o[j] for side, o in zip(("chosen", "rejected"), outs) for j, name in enumerate(engine.labels)}
        else:
            cols = {name: outs[0][j] for j, name in enumerate(engine.labels)}
        return {**cols, "truncated": truncated}
    if shape.kind == shapes.PAIRS:
        chosen, rejected = outs[0][0], outs[1][0]
        cols = {"reward_chosen": chosen, "reward_rejected": rejected, "margin": chosen - rejected,
                "p_chosen": preference_probability(chosen, rejected)}
        if engine.can_normalize:
            cols.update(reward_chosen_normalized=engine.normalize(chosen), reward_rejected_normalized=engine.normalize(rejected))
        return {**cols, "truncated": truncated}
    cols = {"reward": outs[0][0]}
    if engine.can_normalize:
        cols["reward_normalized"] = engine.normalize(outs[0][0])
    return {**cols, "truncated": truncated}


def _add(row: dict[str, Any], cols: dict[str, Any]) -> dict[str, Any]:
    """The input row, every column in its order, then the scores (prefixed if a name is taken)."""
    out = dict(row)
    for name, value in cols.items():
        out[name if name not in row else f"rmspec_{name}"] = value
    return out


def _reject(index: int, reason: str, data: Any) -> dict[str, Any]:
    kind = re.sub(r"\s*\(.*\)$", "", re.sub(r"\b(line|item|message) \d+ ", "", reason))
    return {"row": index, "reason": reason, "reason_kind": kind, "input": data}


def _padding(lengths: list[int], batch_size: int) -> tuple[int, int]:
    """(real tokens, tokens computed) for the engine's length-sorted batches of this chunk (prompt-once
    rows on decoders compute fewer positions than this counts)."""
    ordered = sorted(lengths)
    computed = sum(max(ordered[s:s + batch_size]) * len(ordered[s:s + batch_size]) for s in range(0, len(ordered), batch_size))
    return sum(lengths), computed


def _summary(state: dict[str, Any], out: Path, in_path: Path, started: float, rows_now: int, real: int, padded: int,
             *, resumed: int, already: bool = False) -> dict[str, Any]:
    seconds = time.perf_counter() - started
    return {
        "input": str(in_path), "out": str(out), "rejects": str(output.rejects_path(out)),
        "rows_read": state["rows_done"], "scored": state["scored"], "rejected": state["rejected"],
        "rejected_by_reason": dict(state["reasons"]), "resumed_from_row": resumed, "rows_this_run": rows_now,
        "seconds": round(seconds, 3), "rows_per_second": round(rows_now / seconds, 2) if seconds > 0 and rows_now else None,
        "padding_share": round(1 - real / padded, 4) if padded else None, "already_complete": already,
    }
