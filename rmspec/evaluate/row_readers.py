"""How evaluation reads a benchmark's rows: one reader per `ScoredAs` (rmspec.spec.benchmarks), the one
place that tells a reward model's scores, a judge's verdicts and a process model's steps apart.

A results entry records its `scorer` (the ScoredAs of the model that wrote its rows). Scoring
(scoring_rules.score_rows), an entry's diagnostics (results.entry), the report's section
(report_entries) and the notes on kinds an engine cannot score (benchmark_runs) ask the reader
(`of`, `read_as`) instead of comparing with REWARD / JUDGE / PROCESS; scripts/check_scorer_kinds.py
reports such a comparison anywhere else. A new way of reading rows: a RowReader subclass and a line in READERS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rmspec.evaluate import registry
from rmspec.evaluate.diagnostics import pair_diagnostics, verdict_diagnostics
from rmspec.evaluate.figures import BenchmarkScore, Pair
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import BenchmarkData
from rmspec.spec.benchmarks import CATALOGUE, JUDGE, PROCESS, REWARD, ScoredAs, kinds_scored_by

Rows = Sequence[Mapping[str, Any]]


class RowReader:
    """A reward model's rows (a pointwise model's and a composite's too): one score per response."""

    scored_as: ScoredAs = REWARD
    steps = False  # a score per step: the report shows the process section, not pairs

    def score(self, kind: str, rows: Rows) -> BenchmarkScore:
        score = registry.get(kind).score(rows)
        score.kind = kind  # an entry kind (validation, process_validation) keeps its own name
        return score

    def diagnostics(self, kind: str, rows: Rows) -> dict[str, Any]:
        return pair_diagnostics(kind, rows)

    def pairs(self, kind: BenchmarkKind, rows: Rows) -> list[Pair]:
        """The pairs the report plots."""
        return kind.pairs(rows)

    def progress_total(self, data: BenchmarkData) -> int | None:
        """What scoring counts up to: each example's responses; None: not known before scoring."""
        return sum(len(ex.responses) for ex in data.examples)

    def not_scored(self, kind: str) -> str:
        """Why a kind the model cannot score is skipped."""
        if PROCESS in CATALOGUE[kind].scorers:
            return f"{kind} needs a process reward model (per-step scores)"
        return f"{kind} is not scored by a reward model"


class VerdictReader(RowReader):
    """A generative judge's rows: no scores, verdicts on each pair in both orders."""

    scored_as = JUDGE

    def score(self, kind: str, rows: Rows) -> BenchmarkScore:
        return registry.get(kind).score_verdicts(rows)

    def diagnostics(self, kind: str, rows: Rows) -> dict[str, Any]:
        return verdict_diagnostics(rows)

    def pairs(self, kind: BenchmarkKind, rows: Rows) -> list[Pair]:
        return []

    def progress_total(self, data: BenchmarkData) -> int | None:
        return None


class StepReader(RowReader):
    """A process reward model's rows: a score per step (figures by the kind's rule, as rewards)."""

    scored_as = PROCESS
    steps = True

    def diagnostics(self, kind: str, rows: Rows) -> dict[str, Any]:
        return registry.get(kind).step_diagnostics(rows) if rows else {}

    def pairs(self, kind: BenchmarkKind, rows: Rows) -> list[Pair]:
        return []

    def progress_total(self, data: BenchmarkData) -> int | None:
        return None

    def not_scored(self, kind: str) -> str:
        return f"a process reward model is scored on {', '.join(kinds_scored_by(PROCESS))}"


READERS: dict[ScoredAs, RowReader] = {r.scored_as: r for r in (RowReader(), VerdictReader(), StepReader())}


def of(scorer: str) -> RowReader:
    """The reader of the rows a model scored as `scorer` (a ScoredAs or its value)."""
    return READERS[ScoredAs(scorer)]


def read_as(kind: str, rows: Rows, scorer: str | None = None) -> RowReader:
    """The reader of these rows: the model that wrote them, else (for callers holding only rows: a
    per-example file, a results.json entry written before entries recorded their `scorer`) read
    from the rows: a kind only a process model scores has steps; rows with a verdict are a judge's;
    else a reward model's."""
    if scorer:
        return of(scorer)
    info = CATALOGUE.get(registry.ENTRY_KINDS.get(kind, kind))
    if info is not None and info.scorers == (PROCESS,):
        return READERS[PROCESS]
    return READERS[JUDGE if rows and "verdict" in rows[0] else REWARD]
