"""Score a file: bounded chunks, length-sorted batches inside each, rows written in input order.

Memory stays bounded by `chunk_rows` whatever the file size: a chunk is read, encoded, scored in
batches of similar length (the engine sorts inside the call), written, and dropped. What is scored
follows the scorer's kind (rmspec.inference.scorer.ScorerKind): rewards, pointwise outputs, a
judge's verdicts, or a process model's per-step scores (rmspec.score.steps).

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

from rmspec.composite.scorer import CompositeScorer
from rmspec.errors import DataError
from rmspec.inference.engine import RewardEngine, preference_probability
from rmspec.inference.ensemble import member_std
from rmspec.inference.process import StepEngine
from rmspec.inference.scorer import ScorerKind
from rmspec.inference.scorers import composite as composite_rows
from rmspec.inference.scorers import shapes
from rmspec.inference.scorers.process import step_columns, step_item, step_reason, step_shape
from rmspec.messages import Invalid
from rmspec.score import output, reader
from rmspec.score.reader import BadRow


def score_file(
    engine: RewardEngine | StepEngine | CompositeScorer,
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
        detect = step_shape if engine.kind == ScorerKind.PROCESS else shapes.detect  # a PRM: prompt + steps
        shape = (
            composite_rows.composite_shape(engine)
            if engine.kind == ScorerKind.COMPOSITE
            else detect(list(first), named)
        )
        rows = iter(reader.open_rows(in_path, split=split, skip=skip).rows)  # the peek consumed rows: read again
    if engine.kind == ScorerKind.JUDGE and shape.kind != shapes.PAIRS:
        raise DataError(
            f"a generative judge compares two responses; these rows are {shape.kind}",
            "give prompt + chosen + rejected rows (--columns prompt=..,chosen=..,rejected=..)",
        )
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
        if engine.kind == ScorerKind.COMPOSITE:  # rules, judges, models: rmspec.score.composite_rows
            scored, rejects, (r, p) = *composite_rows.score_chunk(engine, shape, chunk, index), (0, 0)
        else:
            scored, rejects, (r, p) = _score_chunk(engine, shape, chunk, index, bs)
        real, padded = real + r, padded + p
        writer.write(scored, rejects, len(chunk))
        index += len(chunk)
        if progress:
            progress(index, total)
    writer.finish()
    summary = _summary(writer.state, out, in_path, started, index - skip, real, padded, resumed=skip)
    summary["shape"] = shape.describe()
    if engine.kind == ScorerKind.COMPOSITE:  # failures per component and reason (this run's rows)
        summary["failures"] = engine.counts.to_json()
    return summary


def _prepare_out(out: Path, identity: dict[str, Any], resume: bool, overwrite: bool) -> dict[str, Any] | None:
    files = [out, output.rejects_path(out), output.progress_path(out)]
    if resume:
        state = output.load_resume(out, identity)
        if state is None and out.exists():
            raise DataError(
                f"--resume: {out} exists but has no progress record ({output.progress_path(out).name})",
                "it was not written by rmspec score; start afresh with --overwrite",
            )
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


def _score_chunk(
    engine: RewardEngine | StepEngine, shape: shapes.Shape, chunk: list[Any], first_index: int, batch_size: int
) -> Chunk:
    """(scored rows, rejects, (real tokens, tokens in the batches)) of one chunk."""
    process = engine.kind == ScorerKind.PROCESS
    layout = engine.layout if isinstance(engine, RewardEngine) else None  # checks tool turns (process rows have none)
    kept: list[tuple[dict[str, Any], Any]] = []
    rejects = []
    for k, row in enumerate(chunk):
        i = first_index + k
        if isinstance(row, BadRow):
            rejects.append(_reject(i, row.reason, row.kind, row.raw))
            continue
        try:
            kept.append((row, step_item(row, shape) if process else shape.items(row, layout)))
        except Invalid as exc:
            rejects.append(_reject(i, *(step_reason(exc) if process else shapes.reason(exc)), row))
    cols, padding = _scores(engine, shape, [item for _, item in kept], batch_size)
    return [_add(row, c) for (row, _), c in zip(kept, cols)], rejects, padding


def _scores(
    engine: RewardEngine | StepEngine, shape: shapes.Shape, items: list[Any], batch_size: int
) -> tuple[list[dict[str, Any]], tuple[int, int]]:
    """The score columns per item, by the scorer's kind, and the padding count."""
    if engine.kind == ScorerKind.PROCESS:  # per-step scores and the predicted first wrong step
        return step_columns(engine, items), (0, 0)
    if engine.kind == ScorerKind.JUDGE:  # pairs only (score_file checks): the verdict on (chosen, rejected)
        judged = engine.verdicts(
            [its[0][0] for its in items], [its[0][1] for its in items], [its[1][1] for its in items], batch_size
        )
        return [{"verdict": v, "judge_output": text} for v, text in judged], (0, 0)
    encoded = engine.encode([item for its in items for item in its])
    groups, pos = [], 0
    for its in items:  # a row's texts share its prompt: computed once on decoders (engine.prompt_once)
        groups.append(encoded[pos : pos + len(its)])
        pos += len(its)
    outputs = engine.grouped_outputs(groups, batch_size)
    return (
        [_columns(engine, shape, outs, enc) for outs, enc in zip(outputs, groups)],
        _padding([len(e.ids) for e in encoded], batch_size),
    )


def _columns(engine: RewardEngine, shape: shapes.Shape, outs: list[list[float]], enc: list[Any]) -> dict[str, Any]:
    truncated = any(e.truncated for e in enc)
    cols: dict[str, Any]
    if engine.kind == ScorerKind.POINTWISE:
        if shape.kind == shapes.PAIRS:
            cols = {
                f"{name}_{side}": o[j]
                for side, o in zip(("chosen", "rejected"), outs)
                for j, name in enumerate(engine.labels)
            }
        else:
            cols = {name: outs[0][j] for j, name in enumerate(engine.labels)}
        return {**cols, "truncated": truncated}
    if shape.kind == shapes.PAIRS:
        chosen, rejected = outs[0][0], outs[1][0]
        cols = {
            "reward_chosen": chosen,
            "reward_rejected": rejected,
            "margin": chosen - rejected,
            "p_chosen": preference_probability(chosen, rejected),
        }
        if engine.can_normalize:
            cols.update(
                reward_chosen_normalized=engine.normalize(chosen), reward_rejected_normalized=engine.normalize(rejected)
            )
        if len(outs[0]) > 1:  # an ensemble (rmspec.inference.ensemble): outputs 1.. are its members
            cols.update(reward_std_chosen=member_std(outs[0]), reward_std_rejected=member_std(outs[1]))
        return {**cols, "truncated": truncated}
    cols = {"reward": outs[0][0]}
    if engine.can_normalize:
        cols["reward_normalized"] = engine.normalize(outs[0][0])
    if len(outs[0]) > 1:
        cols["reward_std"] = member_std(outs[0])
    return {**cols, "truncated": truncated}


def _add(row: dict[str, Any], cols: dict[str, Any]) -> dict[str, Any]:
    """The input row, every column in its order, then the scores (prefixed if a name is taken)."""
    out = dict(row)
    for name, value in cols.items():
        out[name if name not in row else f"rmspec_{name}"] = value
    return out


def _reject(index: int, reason: str, kind: str, data: Any) -> dict[str, Any]:
    """A rejects-file row: `reason` says what and where, `kind` is what the summary counts."""
    return {"row": index, "reason": reason, "reason_kind": kind, "input": data}


def _padding(lengths: list[int], batch_size: int) -> tuple[int, int]:
    """(real tokens, tokens in length-sorted batches of one sequence per text): see the module's note
    on decoders that compute each prompt once."""
    ordered = sorted(lengths)
    batches = [ordered[s : s + batch_size] for s in range(0, len(ordered), batch_size)]
    computed = sum(max(batch) * len(batch) for batch in batches)
    return sum(lengths), computed


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
        "rejects": str(output.rejects_path(out)),
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
