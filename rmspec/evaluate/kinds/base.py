"""What a benchmark kind provides, with the defaults most kinds share.

A kind turns its file's rows into `Example`s (`examples`, or all of `load`), lays each example's
scores out as a per-example JSONL row (`score_fields`), computes the official figures from
those rows (`score`), gives the chosen-vs-rejected pairs the diagnostics and the report's plots
read (`pairs`), and may add HTML to its section of the report (`report_html`). The defaults are
those of a plain pair benchmark: responses [chosen, rejected], one Pair per row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.excerpts import prompt_excerpt
from rmspec.evaluate.figures import BenchmarkScore, Pair
from rmspec.evaluate.image_prompts import require_image_scorer
from rmspec.evaluate.loading import BenchmarkData, Example, load_rows, resolve_source
from rmspec.evaluate.verdicts import score_two_games
from rmspec.spec.benchmarks import CATALOGUE, BenchmarkInfo


def example_scores(engine: Any, examples: Sequence[Example]) -> list[list[float]]:
    """Rewards for each benchmark Example's responses, in the example's order: each prompt computed
    once for its responses where the model allows (RewardEngine.score_groups), same scores."""
    scores: list[list[float]] = engine.score_groups([(ex.prompt, list(ex.responses)) for ex in examples])
    return scores


class BenchmarkKind:
    name: str = ""
    columns: tuple[str, ...] = ()  # what a file in the official schema must have (id columns are optional)
    judge_section: Callable[[str], str] | None = None  # a judge's sections by subset, where the benchmark has them
    source_column: str | None = None  # a finer grouping than the subset the diagnostics also count by

    @property
    def info(self) -> BenchmarkInfo:
        return CATALOGUE[self.name]

    # ------------------------------------------------------------- loading

    def load(
        self,
        path: str | None,
        *,
        split: str | None = None,
        preset: str | None = None,
        limit: int | None = None,
        base_dir: Any = None,
    ) -> BenchmarkData:
        if preset is not None:
            raise DataError(f"benchmark {self.name!r}: preset applies to kind 'pairs' only", "remove preset")
        source, local = resolve_source(self.name, path, base_dir)
        rows, used_split = load_rows(self.name, source, local, split, self.columns)
        if limit is not None:
            rows = rows[:limit]
        if not rows:
            raise DataError(f"benchmark {self.name!r}: {source} has no rows", "check the file or the split")
        return BenchmarkData(self.name, source, used_split, self.examples(rows, source))

    def examples(self, rows: list[dict[str, Any]], source: str) -> list[Example]:
        raise NotImplementedError

    def local_files(self, source: str) -> list[str]:
        """The files of this local path that the check before the run (`validate`, `plan`, `run SPEC`:
        rmspec.evaluate.file_check) reads record by record for the kind's columns: the file itself, none
        for a folder (left to the evaluation). A kind that knows its folder's layout lists its files,
        and raises a DataError for a layout the evaluation could not read. Light: no torch, no datasets."""
        from pathlib import Path

        return [source] if Path(source).is_file() else []

    # ------------------------------------------------------------- per-example rows

    def scored_rows(self, engine: Any, data: BenchmarkData) -> list[dict[str, Any]]:
        """Score the examples with the engine; one JSONL row per example."""
        require_image_scorer(engine, self.name, [ex.prompt for ex in data.examples])  # images need a VLM
        return self.per_example_rows(data, example_scores(engine, data.examples))

    def per_example_rows(self, data: BenchmarkData, scores: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
        if len(scores) != len(data.examples):
            raise ValueError(f"{len(scores)} score lists for {len(data.examples)} examples")
        rows = []
        for example, s in zip(data.examples, scores):
            row: dict[str, Any] = {"id": example.id, "subset": example.subset}
            row.update(self.score_fields(example, [float(v) for v in s], [len(r) for r in example.responses]))
            row["prompt"] = prompt_excerpt(example.prompt)  # the report's misranked pairs show it
            rows.append(row)
        return rows

    def score_fields(self, example: Example, scores: list[float], lengths: list[int]) -> dict[str, Any]:
        """The row's scores (and response lengths in characters, for the length-bias diagnostics)."""
        return {
            "score_chosen": scores[0],
            "score_rejected": scores[1],
            "len_chosen": lengths[0],
            "len_rejected": lengths[1],
        }

    # ------------------------------------------------------------- figures

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        """The official figures from the per-example rows of a reward (or process) model."""
        raise NotImplementedError

    def score_verdicts(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        """The figures of a generative judge's rows (verdicts in both orders)."""
        return score_two_games(
            self.name,
            [str(r.get("source") or r.get("subset") or "all") for r in rows],
            [str(r["label"]) for r in rows],
            [r.get("verdict") for r in rows],
            [r.get("verdict_swapped") for r in rows],
            self.judge_section,
        )

    def pairs(self, rows: Sequence[Mapping[str, Any]]) -> list[Pair]:
        return [
            Pair(
                str(r.get("subset") or "all"),
                float(r["score_chosen"]),
                float(r["score_rejected"]),
                r.get("len_chosen"),
                r.get("len_rejected"),
            )
            for r in rows
        ]

    def step_diagnostics(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """A process reward model's diagnostics (kinds scored per step)."""
        raise NotImplementedError(f"{self.name} is not scored per step")

    def report_html(self, entry: Mapping[str, Any]) -> list[str]:
        """HTML blocks the report adds to this kind's section, after its subset table."""
        return []
