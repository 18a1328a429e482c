"""`eval:` held-out validation metrics and benchmarks scored by their official rules."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PositiveInt

from rmspec.spec.base import Section
from rmspec.spec.benchmarks import CATALOGUE, kind_names

# Kind -> its official hub id (None: the kind needs a file), read from the catalogue.
BENCHMARK_DEFAULTS = {name: info.hub for name, info in CATALOGUE.items()}


class Benchmark(Section):
    kind: Literal[kind_names()] = Field(  # type: ignore[valid-type]  # the catalogue's names (use_benchmark_kinds)
        description="Benchmark; each is scored by its own official rules."
    )
    path: str | None = Field(
        None, description="Hub id or local file in the benchmark's schema; default: the official hub id."
    )
    split: str | None = Field(
        None, description="Split to read (default: the benchmark's official split; processbench: all four)."
    )
    preset: str | None = Field(None, description="pairs: mapping preset of the file (default: pairs).")
    limit: PositiveInt | None = Field(None, description="Score at most this many examples (smoke tests).")
    name: str | None = Field(
        None,
        description="Its name in results.json, RUN/eval/NAME.jsonl and the report's tables (default: the file's "
        "stem for pairs, else the kind; a second one of a kind: KIND-STEM). Unique among eval.benchmarks.",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
    )


class EvalSpec(Section):
    validation: bool = Field(True, description="Report metrics and diagnostics on the validation split.")
    benchmarks: list[Benchmark] = Field(default_factory=list, description="Benchmarks run after training.")
    batch_size: PositiveInt = Field(
        32,
        description="Sequences per scoring batch at most (sorted by length). A batch of rows of different lengths "
        "is also cut where its padded attention mask (rows x width x width) would pass 64 Mi elements, so long rows "
        "are scored alone, without a mask (32 rows batch together up to 1,448 tokens); scores do not change.",
    )


def use_benchmark_kinds(*embedding: type[BaseModel]) -> None:
    """Make `eval.benchmarks[].kind` accept exactly the catalogue's kinds now (the benchmark registry
    calls it when a kind is registered or removed, rmspec.evaluate.registry): Benchmark, EvalSpec and
    the documents that embed it (`embedding`) are rebuilt, and BENCHMARK_DEFAULTS follows."""
    kinds: Any = Literal[kind_names()]
    Benchmark.model_fields["kind"].annotation = kinds
    BENCHMARK_DEFAULTS.clear()
    BENCHMARK_DEFAULTS.update({name: info.hub for name, info in CATALOGUE.items()})
    models: tuple[type[BaseModel], ...] = (Benchmark, EvalSpec, *embedding)
    for model in models:
        model.model_rebuild(force=True)
