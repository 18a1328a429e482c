"""The data quality report: where every row went, and what the kept rows look like.

`DataReport.to_json()` is what `data_report.json` holds and what `rmspec data report --json`
prints; `rmspec.render.data_view` draws it for people.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SourceCounts:
    """Reconciliation for one source: records = rows_read + rows_added_by_mapping = kept + rejected."""

    rows_read: int = 0
    rows_added_by_mapping: int = 0  # raw UltraFeedback all_pairs adds, helpsteer2 pair_by merges (negative)
    rows_kept: int = 0
    rows_rejected: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    rejected_by_stage: dict[str, dict[str, int]] = field(default_factory=dict)
    # A mixture's sampling (reported only for data.sources): the dataset's weight, the training and
    # validation rows it gave, the extra copies up-sampling added to training (counted apart from
    # rows_kept: the same rows again), and the rows of a sized dataset the interleaved stream never
    # drew (first_exhausted stopped first; never read, so outside rows_read).
    weight: float | None = None
    rows_train: int = 0
    rows_validation: int = 0
    rows_repeated: int = 0
    rows_not_drawn: int = 0

    @property
    def reconciled(self) -> bool:
        records = self.rows_read + self.rows_added_by_mapping
        return records == self.rows_kept + self.rows_rejected and self.rows_rejected == sum(self.rejected.values())


@dataclass
class DataReport:
    approach: str
    layout: str | None
    max_length: int | None
    sources: dict[str, SourceCounts]
    splits: dict[str, int]
    augmented: dict[str, int] = field(default_factory=dict)
    augmented_rejected: dict[str, int] = field(default_factory=dict)
    length_heuristic_accuracy: float | None = None
    token_lengths: dict[str, dict[str, Any]] = field(default_factory=dict)  # rmspec.data.report.distribution
    truncation_rate: float = 0.0
    # Pairs whose common prompt cut took more from the shorter side than cutting it alone would
    # have (Bradley-Terry, truncate_prompt_left; a subset of the truncated pairs).
    shared_prefix_cut_pairs: int = 0
    duplicate_rate: float = 0.0
    ties: int = 0
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: dict[str, Any] = field(
        default_factory=dict
    )  # process data: steps, wrong steps, steps dropped past max_length
    notes: list[str] = field(default_factory=list)
    # data.sources: how the datasets were mixed (method, stopping strategy, seed, weights, sizes).
    mixture: dict[str, Any] | None = None
    # Rows with images (rmspec.vision.tokens.summary): images per row, sizes, visual tokens per row.
    images: dict[str, Any] | None = None
    seconds: float = 0.0
    cached: bool = False
    fingerprint: str = ""

    @property
    def rows_read(self) -> int:
        return sum(s.rows_read for s in self.sources.values())

    @property
    def rows_kept(self) -> int:
        return sum(s.rows_kept for s in self.sources.values())

    @property
    def rejected(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for s in self.sources.values():
            total.update(s.rejected)
        return dict(total.most_common())

    @property
    def reconciled(self) -> bool:
        return all(s.reconciled for s in self.sources.values())

    def to_json(self) -> dict[str, Any]:
        out = {
            "rows_read": self.rows_read,
            "rows_kept": self.rows_kept,
            "rows_rejected": sum(self.rejected.values()),
            "rejected": self.rejected,
            "reconciled": self.reconciled,
            "splits": self.splits,
            "length_heuristic_accuracy": self.length_heuristic_accuracy,
        }
        body = asdict(self)
        body["sources"] = {
            k: {**_counts_json(v, self.mixture is not None), "reconciled": v.reconciled}
            for k, v in self.sources.items()
        }
        if self.mixture is None:  # one dataset: the report keeps the keys it always had
            body.pop("mixture")
        if self.images is None:  # text data: no images section
            body.pop("images")
        return {**out, **body}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DataReport:
        names = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["sources"] = {
            k: SourceCounts(**{f: v[f] for f in SourceCounts.__dataclass_fields__ if f in v})
            for k, v in data["sources"].items()
        }
        return cls(**kwargs)


MIX_FIELDS = ("weight", "rows_train", "rows_validation", "rows_repeated", "rows_not_drawn")


def _counts_json(counts: SourceCounts, mixture: bool) -> dict[str, Any]:
    body = asdict(counts)
    if not mixture:
        for name in MIX_FIELDS:
            body.pop(name)
    return body


def count_rejects(stages: Any, reasons: Any) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Rejects per reason and per (stage, reason), counted in Arrow (no per-row Python objects)."""
    import pyarrow as pa

    table = pa.table(
        {
            "stage": pa.array(stages, pa.string()) if not isinstance(stages, (pa.Array, pa.ChunkedArray)) else stages,
            "reason": pa.array(reasons, pa.string())
            if not isinstance(reasons, (pa.Array, pa.ChunkedArray))
            else reasons,
        }
    )
    table = table.filter(pa.compute.not_equal(table["reason"], ""))
    grouped = table.group_by(["stage", "reason"]).aggregate([("reason", "count")]).to_pylist()
    by_reason: Counter[str] = Counter()
    by_stage: dict[str, Counter[str]] = {}
    for g in grouped:
        by_reason[g["reason"]] += g["reason_count"]
        by_stage.setdefault(g["stage"], Counter())[g["reason"]] += g["reason_count"]
    return dict(by_reason.most_common()), {s: dict(c.most_common()) for s, c in sorted(by_stage.items())}


# Upper edges (tokens) of the length buckets the report counts rows in: powers of two from 512 to 128k,
# the lengths long-context data is sized and benchmarked at (Long-RewardBench: 4k ... 128k).
BUCKET_EDGES = tuple(512 * 2**k for k in range(9))


def bucket_label(edge: int) -> str:
    return f"<={edge // 1024}k" if edge >= 1024 else f"<={edge}"


def length_buckets(ordered: Any) -> dict[str, int]:
    """Rows per length bucket (`<=512`, `<=1k`, ... `<=128k`, `>128k`), non-empty buckets only, in order;
    a row of exactly 4,096 tokens counts in `<=4k`. ordered: the lengths, sorted."""
    import numpy as np

    counts = np.diff(np.searchsorted(ordered, BUCKET_EDGES, side="right"), prepend=0, append=ordered.size)
    labels = [*map(bucket_label, BUCKET_EDGES), f">{BUCKET_EDGES[-1] // 1024}k"]
    return {label: int(c) for label, c in zip(labels, counts) if c}


def distribution(values: Any, limit: int | None) -> dict[str, Any]:
    import numpy as np

    ordered = np.sort(np.asarray(values, dtype=np.int64))
    n = int(ordered.size)
    if not n:
        return {"count": 0}
    q = lambda p: float(ordered[min(n - 1, int(p * (n - 1) + 0.5))])  # noqa: E731
    out: dict[str, Any] = {
        "count": n,
        "min": float(ordered[0]),
        "mean": round(float(ordered.mean()), 2),
        "p50": q(0.5),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": float(ordered[-1]),
    }
    if limit:
        out["over_max_length"] = int((ordered > limit).sum())
    out["buckets"] = length_buckets(ordered)
    return out


def length_heuristic(chosen: Any, rejected: Any) -> float | None:
    """Accuracy of "the longer response is the chosen one" in tokens; a tie counts half (a coin flip)."""
    import numpy as np

    c, r = np.asarray(chosen), np.asarray(rejected)
    if not c.size:
        return None
    score = float((c > r).sum()) + 0.5 * float((c == r).sum())
    return round(score / c.size, 4)


def rejects_line(report: dict[str, Any], rejects_path: Any) -> str:
    """One console line: rows read, kept and dropped by reason, and where the rejects file is."""
    read, kept, dropped = report.get("rows_read", 0), report.get("rows_kept", 0), report.get("rows_rejected", 0)
    line = f"data: {read:,} rows read, {kept:,} kept"
    if not dropped:
        return line + ", none dropped"
    reasons = ", ".join(f"{reason} {count:,}" for reason, count in (report.get("rejected") or {}).items())
    share = f" ({dropped / read:.1%} of those read)" if read else ""
    return line + f", {dropped:,} dropped{share}: {reasons}; each with its reason in {rejects_path}"


def over_limit(report: dict[str, Any], limit: int | float | None) -> str | None:
    """What `data.max_rejected` says when the rejects exceed it (a count, or a fraction of the rows
    read, as the field's description says), else None."""
    if limit is None:
        return None
    read, dropped = report.get("rows_read", 0), report.get("rows_rejected", 0)
    if isinstance(limit, float):
        if dropped <= limit * read:
            return None
        return f"{dropped:,} of {read:,} rows rejected ({dropped / read:.1%}), more than data.max_rejected {limit:g}"
    if dropped <= limit:
        return None
    return f"{dropped:,} row{'s' if dropped != 1 else ''} rejected, more than data.max_rejected {limit:,}"
