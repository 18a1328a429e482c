"""`data:` where the rows come from, how they map onto the canonical record, filters, split.

The sections live by concern: data_sources (data.source), data_mapping (data.mapping), data_filters
(data.filters, data.augment), data_split (data.split), data_images (data.images); this module holds the mixture (data.sources)
and DataSpec, and re-exports the others' names so `from rmspec.spec.data import ...` keeps working.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section
from rmspec.spec.data_filters import (
    Augment,
    CrossPromptNegatives,
    DedupFilter,
    DropEmptyFilter,
    DropIdenticalFilter,
    Filter,
    MaxLengthFilter,
    MinScoreGapFilter,
    PairsFromScores,
    RegexFilter,
    SampleFilter,
    TruncatedNegatives,
)
from rmspec.spec.data_images import ImagesSpec
from rmspec.spec.data_mapping import PRESETS, ColumnMap, MappingSpec
from rmspec.spec.data_sources import (
    BUILTIN_SOURCES,
    CustomSource,
    DiskSource,
    FilesSource,
    HuggingFaceSource,
    Source,
    SqlSource,
    registered_sources,
)
from rmspec.spec.data_split import SplitSpec

__all__ = [
    "BUILTIN_SOURCES",
    "PRESETS",
    "RESERVED_NAMES",
    "SINGLE_SOURCE_NAME",
    "WEIGHT_TOLERANCE",
    "Augment",
    "ColumnMap",
    "CrossPromptNegatives",
    "CustomSource",
    "DataSpec",
    "DedupFilter",
    "DiskSource",
    "DropEmptyFilter",
    "DropIdenticalFilter",
    "FilesSource",
    "Filter",
    "HuggingFaceSource",
    "ImagesSpec",
    "MappingSpec",
    "MaxLengthFilter",
    "MinScoreGapFilter",
    "MixtureSource",
    "PairsFromScores",
    "RegexFilter",
    "SampleFilter",
    "Source",
    "SplitSpec",
    "SqlSource",
    "TruncatedNegatives",
    "registered_sources",
]

# ---------------------------------------------------------------- mixtures

# Report keys the pipeline uses for its own parts: a mixture entry may not take them.
RESERVED_NAMES = ("validation", "train-augmented")
SINGLE_SOURCE_NAME = "train"  # the one entry of the single-source form (data.source + data.mapping)
WEIGHT_TOLERANCE = 1e-6


class MixtureSource(Section):
    """One dataset of a mixture (`data.sources`): its own source, mapping and filters; its share of
    the training set by `weight`, or an exact number of training rows by `rows`."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="Unique name; every row keeps it (the source column, rejects, per-source figures).",
    )
    source: Source = Field(description="Where this dataset's rows come from (any source kind).")
    mapping: MappingSpec = Field(
        default_factory=MappingSpec, description="How this dataset's columns map onto the canonical record."
    )
    filters: list[Filter] = Field(
        default_factory=list, description="Applied to this dataset only, before the shared data.filters."
    )
    weight: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Share of the mixed training set (weights of all entries sum to 1), "
        "sampled with the split seed. Give weight on every entry or on none.",
    )
    rows: PositiveInt | Literal["all"] = Field(
        "all",
        description="Without weights: exactly this many training rows from this dataset (repeats rows "
        "when it has fewer), or all of them.",
    )

    @field_validator("filters")
    @classmethod
    def _no_model_limit(cls, filters: list[Any]) -> list[Any]:
        if any(f.kind == "max_length" for f in filters):
            raise ValueError("max_length is the model's limit, one for all sources: put it under data.filters")
        return filters

    @model_validator(mode="after")
    def _weight_or_rows(self) -> MixtureSource:
        if self.weight is not None and self.rows != "all":
            raise ValueError(f"source {self.name!r}: give weight or rows, not both")
        return self


class DataSpec(Section):
    source: Source | None = Field(
        None,
        description="Where the rows come from (kind: huggingface, disk, files, sql, or a registered custom kind). "
        "For several datasets use sources instead.",
    )
    sources: list[MixtureSource] | None = Field(
        None,
        min_length=1,
        description="A mixture: several datasets, each with its own source, mapping and "
        "filters, mixed by weight or by row count. Instead of source.",
    )
    stopping_strategy: Literal["first_exhausted", "all_exhausted"] = Field(
        "first_exhausted",
        description="Weighted mixtures: first_exhausted sizes the mix so no dataset repeats a "
        "row (the rest of the larger ones is sampled out); all_exhausted sizes it so every row of every dataset "
        "is used (smaller ones repeat). The same names and meaning as datasets.interleave_datasets.",
    )
    mapping: MappingSpec = Field(
        default_factory=MappingSpec,
        description="How source columns map onto prompt/chosen/rejected or scores. "
        "With sources: only chat_template is read here (one for all datasets).",
    )
    filters: list[Filter] = Field(
        default_factory=list, description="Applied in order; every dropped row is counted and written to rejects."
    )
    augment: list[Augment] = Field(
        default_factory=list, description="Extra training pairs; never crosses the train/validation boundary."
    )
    split: SplitSpec = Field(default_factory=SplitSpec, description="Train/validation split.")
    images: ImagesSpec = Field(
        default_factory=ImagesSpec,
        description="How the rows' images are read and checked, for every dataset: downloads of http(s) URLs "
        "(off unless allowed), the largest image in bytes and in pixels (docs/multimodal.md).",
    )
    max_rejected: NonNegativeInt | float | None = Field(
        None,
        description="The most rows the data may lose before training: a count (e.g. 100) or a fraction of "
        "the rows read (e.g. 0.05, from 0 to 1). More rejects than that fail `rmspec run` before training, "
        "with the count per reason and the rejects file. Default: no limit (every reject is still counted, "
        "printed and written to rejects.jsonl).",
    )
    num_proc: PositiveInt | None = Field(
        None,
        description="Processes for mapping, filtering and tokenizing (datasets' num_proc). Default: one below "
        "100,000 rows, else up to 8 (the CPU count). The prepared rows are the same for any value.",
    )

    @field_validator("max_rejected")
    @classmethod
    def _count_or_fraction(cls, value: int | float | None) -> int | float | None:
        if isinstance(value, float) and not 0.0 <= value <= 1.0:
            raise ValueError(
                f"{value:g} is neither a count (a whole number, e.g. 100) nor a fraction of the rows read "
                "(from 0 to 1, e.g. 0.05)"
            )
        return value

    @model_validator(mode="after")
    def _one_form(self) -> DataSpec:
        if (self.source is None) == (self.sources is None):
            raise ValueError("give data.source (one dataset) or data.sources (a mixture), exactly one of them")
        weighted_mix = self.sources is not None and any(e.weight is not None for e in self.sources)
        if "stopping_strategy" in self.model_fields_set and not weighted_mix:
            raise ValueError(
                "data.stopping_strategy sizes a weighted mixture (data.sources with weight); "
                "this spec has none, so leave it out"
            )
        if self.sources is None:
            return self
        names = [e.name for e in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(
                f"data.sources: duplicate name(s) {', '.join(map(repr, dupes))}: each dataset needs its own"
            )
        taken = [n for n in names if n in RESERVED_NAMES]
        if taken:
            raise ValueError(
                f"data.sources: the name {taken[0]!r} is reserved (used for {', '.join(RESERVED_NAMES)} "
                "in the report); pick another"
            )
        weighted = [e for e in self.sources if e.weight is not None]
        if weighted and len(weighted) != len(self.sources):
            missing = [e.name for e in self.sources if e.weight is None]
            raise ValueError(
                f"data.sources: weights on some entries but not on {', '.join(missing)}: give weight on "
                "every entry (shares of the mix) or on none (rows: N or all)"
            )
        total = sum(e.weight or 0.0 for e in weighted)
        if weighted and abs(total - 1.0) > WEIGHT_TOLERANCE:
            shown = " + ".join(f"{e.weight:g}" for e in weighted)
            raise ValueError(
                f"data.sources: weights sum to {total:g} ({shown}), not 1; weights are shares of the "
                "mixed training set and are not normalized for you"
            )
        if self.split.validation_source is not None:
            raise ValueError(
                "data.split.validation_source: with data.sources each dataset is split on its own "
                "(data.split.validation_fraction), so validation is reported per dataset"
            )
        mapping_set = self.mapping.model_fields_set - {"chat_template"}
        if mapping_set:
            raise ValueError(
                f"data.mapping.{sorted(mapping_set)[0]}: with data.sources each dataset has its own "
                "mapping (data.sources[i].mapping); data.mapping sets only chat_template"
            )
        for e in self.sources:
            if "chat_template" in e.mapping.model_fields_set and e.mapping.chat_template != self.mapping.chat_template:
                raise ValueError(
                    f"data.sources: {e.name!r} sets mapping.chat_template {e.mapping.chat_template!r}; "
                    "how messages become text is the model's, one for all datasets: set it in data.mapping"
                )
        return self

    @property
    def is_mixture(self) -> bool:
        return self.sources is not None

    def mixture(self) -> list[MixtureSource]:
        """The datasets to read, in order: the single-source form is a one-entry list named 'train'."""
        if self.sources is not None:
            return list(self.sources)
        assert self.source is not None  # _one_form: no sources means one source
        return [
            MixtureSource.model_construct(
                name=SINGLE_SOURCE_NAME, source=self.source, mapping=self.mapping, filters=[], weight=None, rows="all"
            )
        ]

    @property
    def weighted(self) -> bool:
        return bool(self.sources) and all(e.weight is not None for e in self.sources or [])
