"""Mixing datasets (`data.sources`): how many training rows each dataset gives, which ones, and
the interleaved stream when a dataset streams.

Sized datasets (files, SQL, disk, a downloaded hub set) are mixed after each is split on its own:
a weight is a share of the mixed training set, and the size of that set follows the stopping
strategy (the names of `datasets.interleave_datasets`): `first_exhausted` takes the largest set
in which no dataset repeats a row (T = min n_i / w_i), `all_exhausted` the smallest in which every
row of every dataset is used (T = max n_i / w_i). Dataset i gives round(w_i x T) rows, drawn with
the split seed (and its name); fewer than it has: the rest is marked `sampled_out` (a reject with
its reason, written to the rejects file); more: whole copies plus a seeded draw, counted as
repeats. Without weights, `rows: N` asks for N training rows the same way and `rows: all` (the
default) takes every row.

When a dataset streams, its size is unknown until it is read, so the datasets are mixed as they
are read: each is mapped to canonical records and `datasets.interleave_datasets` draws from them
with the weights as probabilities, the split seed and the spec's stopping strategy; the drawn
rows are written to Arrow and then split per dataset. Counts follow the weights in expectation,
not exactly, and the weights apply to the rows read (before the split).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.data.columns import column, mark_indices, materialise
from rmspec.data.columns import stable_hash as _hash
from rmspec.data.report import SourceCounts
from rmspec.errors import DataError

SAMPLE_STAGE = "mix:weight"


@dataclass
class Drawn:
    """One dataset's training rows after mixing, the rows it sampled out (marked) and its repeats."""

    train: Any
    sampled_out: Any  # datasets.Dataset of rejected rows (reason sampled_out), or None
    repeats: int
    target: int


def targets(sizes: dict[str, int], entries: list[Any], strategy: str) -> dict[str, int]:
    """Training rows per dataset: weights (with the stopping strategy) or rows: N / all."""
    weighted = any(e.weight is not None for e in entries)  # the spec allows weights on all or none
    for i, e in enumerate(entries):
        if sizes[e.name] == 0 and (e.weight is not None or e.rows != "all"):
            asked = f"weight {e.weight:g}" if e.weight is not None else f"rows {e.rows}"
            raise DataError(
                f"data.sources[{i}] ({e.name}): no training rows left after mapping, filters and the "
                f"split, but it has {asked}",
                f"check {e.name}'s source and mapping (see the rejects file), or remove it from the mix",
            )
    if not weighted:
        return {e.name: sizes[e.name] if e.rows == "all" else int(e.rows) for e in entries}
    ratios = [sizes[e.name] / e.weight for e in entries]
    total = min(ratios) if strategy == "first_exhausted" else max(ratios)
    return {e.name: int(round(e.weight * total)) for e in entries}


def draw(train: Any, target: int, seed: int, name: str) -> Drawn:
    """`target` rows of `train`, drawn with a seed of (split seed, dataset name); the rest marked."""
    n = len(train)
    rng = random.Random(f"{seed}:{name}")
    if target == n:
        return Drawn(train, None, 0, target)
    if target < n:
        keep = sorted(rng.sample(range(n), target))
        kept = set(keep)
        out = [i for i in range(n) if i not in kept]
        dropped = train.select(out).map(
            mark_indices,
            batched=True,
            with_indices=True,
            new_fingerprint=_hash(train._fingerprint, SAMPLE_STAGE, seed, name, target),
            fn_kwargs={
                "drop": set(range(len(out))),
                "stage": SAMPLE_STAGE,
                "reason": "sampled_out",
                "detail": f"not drawn for the mix ({target} of {n} training rows, seed {seed})",
            },
        )
        return Drawn(train.select(keep), dropped, 0, target)
    whole, rest = divmod(target, n)
    index = list(range(n)) * whole + sorted(rng.sample(range(n), rest))
    return Drawn(train.select(index), None, target - n, target)


def interleave(streams: list[Any], weights: list[float], seed: int, strategy: str, features: Any, folder: Path) -> Any:
    """The datasets' canonical records drawn by `datasets.interleave_datasets` (weights as
    probabilities, the split seed, the stopping strategy), written to Arrow."""
    import datasets

    mixed = datasets.interleave_datasets(streams, probabilities=weights, seed=seed, stopping_strategy=strategy)
    return materialise(mixed, features, folder)


def part_of(mixed: Any, name: str) -> Any:
    """The rows of one dataset in the interleaved stream."""
    return mixed.filter(
        lambda names: [s == name for s in names],
        input_columns=["source"],
        batched=True,
        new_fingerprint=_hash(mixed._fingerprint, "part", name),
    )


def drawn_rows(part: Any) -> int:
    """Rows read from the dataset (records of one source row count once)."""
    return len(set(column(part, "source_index")))


def describe(
    entries: list[Any], strategy: str, seed: int, streamed: bool, sizes: dict[str, int], wanted: dict[str, int]
) -> dict[str, Any]:
    """The report's `mixture`: how the datasets were mixed."""
    weighted = any(e.weight is not None for e in entries)
    method = (
        "datasets.interleave_datasets (weights as probabilities, before the split)"
        if streamed
        else "seeded draw per dataset after its split"
        if weighted
        else "row counts per dataset"
    )
    return {
        "method": method,
        "stopping_strategy": strategy if weighted else None,
        "seed": seed,
        "weights": {e.name: e.weight for e in entries} if weighted else None,
        "rows_asked": {e.name: e.rows for e in entries} if not weighted else None,
        "training_rows_available": sizes,
        "training_rows_drawn": wanted,
    }


def mix_parts(
    parts: dict[str, tuple[Any, Any]],
    entries: list[Any],
    data: Any,
    streamed: bool,
    sources: dict[str, SourceCounts],
    not_drawn: dict[str, int],
    rejected_parts: list[tuple[str, Any]],
) -> tuple[dict[str, tuple[Any, Any]], Any]:
    """Each dataset's training rows drawn to its weight or row count (sized datasets; an
    interleaved stream is mixed already); the counts say what was sampled out and repeated.
    Returns the parts and the unique kept rows (what the report's figures describe)."""
    sizes = {name: len(t) for name, (t, _) in parts.items()}
    wanted = sizes if streamed else targets(sizes, entries, data.stopping_strategy)
    out, pool = {}, []
    for e in entries:
        train, validation = parts[e.name]
        counts = sources[e.name]
        drawn = draw(train, wanted[e.name], data.split.seed, e.name)
        if drawn.sampled_out is not None:
            n = len(drawn.sampled_out)
            counts.rows_kept -= n
            counts.rows_rejected += n
            counts.rejected["sampled_out"] = counts.rejected.get("sampled_out", 0) + n
            counts.rejected_by_stage[SAMPLE_STAGE] = {"sampled_out": n}
            rejected_parts.append((e.name, drawn.sampled_out))
        counts.weight, counts.rows_repeated = e.weight, drawn.repeats
        counts.rows_train, counts.rows_validation = len(drawn.train), len(validation) if validation is not None else 0
        counts.rows_not_drawn = not_drawn.get(e.name, 0)
        out[e.name] = (drawn.train, validation)
        pool += [train if drawn.repeats else drawn.train, *([validation] if validation is not None else [])]
    return out, concat(pool)


def concat(parts: list[Any]) -> Any:
    import datasets

    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
