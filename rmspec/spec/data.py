"""`data:` where the rows come from, how they map onto the canonical record, filters, split."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, PositiveInt, Tag, field_validator, model_validator

from rmspec.spec.base import Section
from rmspec.spec.choices import unknown_choice

# ---------------------------------------------------------------- sources


class _SourceCommon(Section):
    limit: PositiveInt | None = Field(None, description="Read at most this many rows (quick runs).")


class HuggingFaceSource(_SourceCommon):
    kind: Literal["huggingface"]
    path: str = Field(description="Dataset id on the hub (org/name), or a local dataset script/folder.")
    name: str | None = Field(None, description="Dataset configuration name.")
    data_dir: str | None = Field(None, description="Sub-directory of the dataset repository (e.g. helpful-base).")
    split: str = Field("train", description="Split to read.")
    revision: str | None = Field(None, description="Dataset revision to pin.")
    streaming: bool = Field(False, description="Stream rows instead of downloading the whole dataset.")
    token_env: str | None = Field(None, description="Environment variable holding a hub token for gated datasets.")


class DiskSource(_SourceCommon):
    kind: Literal["disk"]
    path: str = Field(description="Directory written by datasets' save_to_disk.")
    split: str | None = Field(None, description="Split to read when the directory holds a DatasetDict.")


class FilesSource(_SourceCommon):
    kind: Literal["files"]
    paths: list[str] = Field(min_length=1, description="Files or glob patterns, relative to the spec file.")
    format: Literal["auto", "json", "jsonl", "parquet", "csv"] = Field(
        "auto", description="File format; auto goes by the extension."
    )
    encoding: str = Field(
        "utf-8", description="Text encoding of JSON, JSON Lines and CSV files (e.g. latin-1 for a legacy export); "
        "a JSON Lines row that does not decode is rejected with reason encoding."
    )

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, encoding: str) -> str:
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ValueError(f"unknown encoding {encoding!r} (e.g. utf-8, latin-1, cp1252, utf-16)") from None
        return encoding


class SqlSource(_SourceCommon):
    kind: Literal["sql"]
    url: str | None = Field(
        None, description="SQLAlchemy URL without a password, e.g. postgresql://user@host/db."
    )
    sqlite: str | None = Field(None, description="Path to an SQLite file (relative to the spec file).")
    query: str = Field(description="SELECT statement whose columns feed the mapping.")
    password_env: str | None = Field(
        None, description="Environment variable that holds the database password (never the password itself)."
    )

    @model_validator(mode="after")
    def _one_target(self) -> "SqlSource":
        if (self.url is None) == (self.sqlite is None):
            raise ValueError("give exactly one of url or sqlite")
        return self

    @field_validator("url")
    @classmethod
    def _no_password(cls, url: str | None) -> str | None:
        if url and "://" in url:
            netloc = url.split("://", 1)[1].split("/", 1)[0]
            if "@" in netloc and ":" in netloc.split("@", 1)[0]:
                raise ValueError(
                    "the URL holds a password; secrets never sit in a spec: remove it and name the "
                    "environment variable that holds it in password_env"
                )
        return url


BUILTIN_SOURCES = ("huggingface", "disk", "files", "sql")


def registered_sources() -> dict[str, str]:
    """Custom sources from the `rmspec.sources` entry-point group (name -> object path)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="rmspec.sources")}


class CustomSource(_SourceCommon):
    """A source registered by a package through the `rmspec.sources` entry point."""

    kind: str = Field(description="Name of a source registered under the rmspec.sources entry point.")
    options: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the source.")

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        custom = registered_sources()
        if kind not in custom:
            raise ValueError(unknown_choice("source kind", kind, [*BUILTIN_SOURCES, *custom]))
        return kind


def _source_tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in BUILTIN_SOURCES else "custom"


Source = Annotated[
    Union[
        Annotated[HuggingFaceSource, Tag("huggingface")],
        Annotated[DiskSource, Tag("disk")],
        Annotated[FilesSource, Tag("files")],
        Annotated[SqlSource, Tag("sql")],
        Annotated[CustomSource, Tag("custom")],
    ],
    Discriminator(_source_tag),
]

# ---------------------------------------------------------------- mapping

PRESETS = (
    "pairs",  # prompt, chosen, rejected (optional margin)
    "hh-rlhf",  # whole transcripts; prompt = shared prefix up to the last Assistant turn
    "conversational",  # chosen/rejected as message lists (ultrafeedback_binarized, Skywork)
    "ultrafeedback-binarized",
    "shp",  # history, human_ref_A/B, labels
    "helpsteer2",  # prompt, response, five 0-4 attributes
    "ultrafeedback",  # raw: instruction + completions to binarize
    "ranked",  # listwise: prompt, responses (N >= 2), scores (one per response, higher is better)
    "messages",  # generative: a list of chat messages
    "stepwise",  # process: prompt, completions (steps), labels (bools): TRL's and trl-lib/math_shepherd's shape
    "math-shepherd",  # process: raw Math-Shepherd text with ки markers, labels as +/- in place of them
    "processbench",  # process: problem, steps, label (index of the first wrong step, -1 for none)
)


class ColumnMap(Section):
    prompt: str | None = Field(None, description="Column with the prompt (text or messages).")
    chosen: str | None = Field(None, description="Column with the preferred response.")
    rejected: str | None = Field(None, description="Column with the dispreferred response.")
    margin: str | None = Field(None, description="Column with a per-pair margin (needs approach.use_margin).")
    score_chosen: str | None = Field(
        None, description="Pairs: column with the chosen response's score (read by augment pairs_from_scores; "
        "a column named score_chosen is read without it).")
    score_rejected: str | None = Field(
        None, description="Pairs: column with the rejected response's score (see score_chosen).")
    response: str | None = Field(None, description="Pointwise: column with the scored response.")
    scores: dict[str, str] | None = Field(
        None, description="Pointwise: attribute name -> column holding its score."
    )
    messages: str | None = Field(None, description="Generative: column with the chat messages.")
    responses: str | None = Field(None, description="Listwise: column with the list of N >= 2 responses to one prompt.")
    response_scores: str | None = Field(
        None, description="Listwise: column with one score per response (higher is better; equal scores are tied)."
    )
    tie: str | None = Field(
        None, description="Pairs: column with a boolean tie label (default: a `tie` column when the data has one).",
    )
    steps: str | None = Field(None, description="Process: column with the list of steps (math-shepherd: the text with ки markers).")
    step_labels: str | None = Field(
        None, description="Process: column with the step labels (bools; math-shepherd: text with +/-; processbench: first wrong step or -1)."
    )
    id: str | None = Field(None, description="Column with a stable row id (kept in rejects and reports).")
    group: str | None = Field(None, description="Column for stratified splits and per-source reports (e.g. source, subset).")


class MappingSpec(Section):
    preset: Literal[PRESETS] | None = Field(  # type: ignore[valid-type]
        None, description="A known dataset layout. Omit and give columns for anything else."
    )
    columns: ColumnMap = Field(default_factory=ColumnMap, description="Explicit columns; override the preset's defaults.")
    binarize: Literal["best_vs_worst", "best_vs_random", "all_pairs", "ranked"] = Field(
        "best_vs_worst", description="ultrafeedback preset: how completions become pairs, or ranked: one row with "
                                     "every rated completion (approach kind listwise)."
    )
    pair_by: str | None = Field(
        None, description="helpsteer2 preset: build pairs by this attribute instead of pointwise rows."
    )
    chat_template: Literal["auto", "tokenizer", "plain"] = Field(
        "auto",
        description="How messages become text: the tokenizer's chat template, a plain 'User:/Assistant:' layout, or auto (template when the tokenizer has one).",
    )


# ---------------------------------------------------------------- filters


class MaxLengthFilter(Section):
    kind: Literal["max_length"]
    max_tokens: PositiveInt | None = Field(None, description="Token limit per sequence; defaults to training.max_length.")
    policy: Literal["drop", "truncate_prompt_left", "truncate_response"] = Field(
        "truncate_prompt_left",
        description="Over-long rows: drop them (counted in rejects), cut the prompt from the left keeping responses whole, or cut the responses.",
    )


class DropIdenticalFilter(Section):
    kind: Literal["drop_identical"]


class DropEmptyFilter(Section):
    kind: Literal["drop_empty"]


class DedupFilter(Section):
    kind: Literal["dedup"]
    on: Literal["row", "prompt"] = Field("row", description="Exact duplicates of the whole row, or of the prompt.")


class RegexFilter(Section):
    kind: Literal["regex"]
    field: Literal["prompt", "chosen", "rejected", "response", "any"] = Field(description="Canonical field to match.")
    pattern: str = Field(description="Python regular expression.")
    action: Literal["include", "exclude"] = Field("exclude", description="Keep only matches, or drop matches.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        import re

        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return pattern


class MinScoreGapFilter(Section):
    kind: Literal["min_score_gap"]
    gap: float = Field(gt=0, description="Drop pairs whose margin/score gap is below this.")


class SampleFilter(Section):
    kind: Literal["sample"]
    n: PositiveInt | None = Field(None, description="Keep this many rows.")
    fraction: float | None = Field(None, gt=0, le=1, description="Keep this fraction of rows.")
    seed: int = Field(0, description="Sampling seed.")

    @model_validator(mode="after")
    def _one(self) -> "SampleFilter":
        if (self.n is None) == (self.fraction is None):
            raise ValueError("give exactly one of n or fraction")
        return self


Filter = Annotated[
    Union[
        MaxLengthFilter,
        DropIdenticalFilter,
        DropEmptyFilter,
        DedupFilter,
        RegexFilter,
        MinScoreGapFilter,
        SampleFilter,
    ],
    Field(discriminator="kind"),
]

# ---------------------------------------------------------------- augmentation


class CrossPromptNegatives(Section):
    kind: Literal["cross_prompt_negatives"]
    fraction: float = Field(0.1, gt=0, le=1, description="Extra pairs as a fraction of the rows.")
    seed: int = Field(0, description="Seed.")


class TruncatedNegatives(Section):
    kind: Literal["truncated_negatives"]
    fraction: float = Field(0.1, gt=0, le=1, description="Extra pairs as a fraction of the rows.")
    keep: float = Field(0.5, gt=0, lt=1, description="Share of the chosen response kept in the negative.")
    seed: int = Field(0, description="Seed.")


class PairsFromScores(Section):
    kind: Literal["pairs_from_scores"]
    attribute: str | None = Field(
        None, description="Omit (or score): each pair's score_chosen/score_rejected (data.mapping.columns."
        "score_chosen/score_rejected, ultrafeedback's and shp's scores); helpsteer2 with pair_by: that attribute.")
    min_gap: float = Field(1.0, gt=0, description="Smallest score difference that makes a pair.")


Augment = Annotated[
    Union[CrossPromptNegatives, TruncatedNegatives, PairsFromScores], Field(discriminator="kind")
]

# ---------------------------------------------------------------- split


class SplitSpec(Section):
    validation_fraction: float | None = Field(
        0.05, gt=0, lt=1,
        description="Seeded share of prompts held out for validation (off when validation_source is given).",
    )
    validation_source: Source | None = Field(
        None, description="A separate source for validation (e.g. the hub's test split) instead of a fraction."
    )
    group_by_prompt: bool = Field(True, description="Keep all rows of one prompt on one side (no leakage).")
    stratify_by: str | None = Field(
        None, description="Canonical column to stratify by (e.g. group, which needs data.mapping.columns.group).")
    seed: int = Field(0, description="Split seed.")

    @model_validator(mode="before")
    @classmethod
    def _source_replaces_fraction(cls, value: Any) -> Any:
        # The fraction's default (0.05) is for specs that name no split at all: a spec that gives only a
        # validation_source means "validate on that", not "refuse because both are set".
        if isinstance(value, dict) and value.get("validation_source") is not None \
                and "validation_fraction" not in value:
            return {**value, "validation_fraction": None}
        return value


# ---------------------------------------------------------------- mixtures

# Report keys the pipeline uses for its own parts: a mixture entry may not take them.
RESERVED_NAMES = ("validation", "train-augmented")
SINGLE_SOURCE_NAME = "train"  # the one entry of the single-source form (data.source + data.mapping)
WEIGHT_TOLERANCE = 1e-6


class MixtureSource(Section):
    """One dataset of a mixture (`data.sources`): its own source, mapping and filters; its share of
    the training set by `weight`, or an exact number of training rows by `rows`."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                      description="Unique name; every row keeps it (the source column, rejects, per-source figures).")
    source: Source = Field(description="Where this dataset's rows come from (any source kind).")
    mapping: MappingSpec = Field(default_factory=MappingSpec, description="How this dataset's columns map onto the canonical record.")
    filters: list[Filter] = Field(
        default_factory=list, description="Applied to this dataset only, before the shared data.filters.")
    weight: float | None = Field(
        None, gt=0, le=1, description="Share of the mixed training set (weights of all entries sum to 1), "
        "sampled with the split seed. Give weight on every entry or on none.")
    rows: PositiveInt | Literal["all"] = Field(
        "all", description="Without weights: exactly this many training rows from this dataset (repeats rows "
        "when it has fewer), or all of them.")

    @field_validator("filters")
    @classmethod
    def _no_model_limit(cls, filters: list[Any]) -> list[Any]:
        if any(f.kind == "max_length" for f in filters):
            raise ValueError("max_length is the model's limit, one for all sources: put it under data.filters")
        return filters

    @model_validator(mode="after")
    def _weight_or_rows(self) -> "MixtureSource":
        if self.weight is not None and self.rows != "all":
            raise ValueError(f"source {self.name!r}: give weight or rows, not both")
        return self


class DataSpec(Section):
    source: Source | None = Field(
        None, description="Where the rows come from (kind: huggingface, disk, files, sql, or a registered custom kind). "
        "For several datasets use sources instead.")
    sources: list[MixtureSource] | None = Field(
        None, min_length=1, description="A mixture: several datasets, each with its own source, mapping and "
        "filters, mixed by weight or by row count. Instead of source.")
    stopping_strategy: Literal["first_exhausted", "all_exhausted"] = Field(
        "first_exhausted", description="Weighted mixtures: first_exhausted sizes the mix so no dataset repeats a "
        "row (the rest of the larger ones is sampled out); all_exhausted sizes it so every row of every dataset "
        "is used (smaller ones repeat). The same names and meaning as datasets.interleave_datasets.")
    mapping: MappingSpec = Field(default_factory=MappingSpec, description="How source columns map onto prompt/chosen/rejected or scores. "
                                 "With sources: only chat_template is read here (one for all datasets).")
    filters: list[Filter] = Field(default_factory=list, description="Applied in order; every dropped row is counted and written to rejects.")
    augment: list[Augment] = Field(default_factory=list, description="Extra training pairs; never crosses the train/validation boundary.")
    split: SplitSpec = Field(default_factory=SplitSpec, description="Train/validation split.")
    num_proc: PositiveInt | None = Field(
        None, description="Processes for mapping, filtering and tokenizing (datasets' num_proc). Default: one below "
                          "100,000 rows, else up to 8 (the CPU count). The prepared rows are the same for any value.")

    @model_validator(mode="after")
    def _one_form(self) -> "DataSpec":
        if (self.source is None) == (self.sources is None):
            raise ValueError("give data.source (one dataset) or data.sources (a mixture), exactly one of them")
        if self.sources is None:
            return self
        names = [e.name for e in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"data.sources: duplicate name(s) {', '.join(map(repr, dupes))}: each dataset needs its own")
        taken = [n for n in names if n in RESERVED_NAMES]
        if taken:
            raise ValueError(f"data.sources: the name {taken[0]!r} is reserved (used for {', '.join(RESERVED_NAMES)} "
                             "in the report); pick another")
        weighted = [e for e in self.sources if e.weight is not None]
        if weighted and len(weighted) != len(self.sources):
            missing = [e.name for e in self.sources if e.weight is None]
            raise ValueError(f"data.sources: weights on some entries but not on {', '.join(missing)}: give weight on "
                             "every entry (shares of the mix) or on none (rows: N or all)")
        total = sum(e.weight or 0.0 for e in weighted)
        if weighted and abs(total - 1.0) > WEIGHT_TOLERANCE:
            shown = " + ".join(f"{e.weight:g}" for e in weighted)
            raise ValueError(f"data.sources: weights sum to {total:g} ({shown}), not 1; weights are shares of the "
                             "mixed training set and are not normalized for you")
        if self.split.validation_source is not None:
            raise ValueError("data.split.validation_source: with data.sources each dataset is split on its own "
                             "(data.split.validation_fraction), so validation is reported per dataset")
        mapping_set = self.mapping.model_fields_set - {"chat_template"}
        if mapping_set:
            raise ValueError(f"data.mapping.{sorted(mapping_set)[0]}: with data.sources each dataset has its own "
                             "mapping (data.sources[i].mapping); data.mapping sets only chat_template")
        for e in self.sources:
            if "chat_template" in e.mapping.model_fields_set and e.mapping.chat_template != self.mapping.chat_template:
                raise ValueError(f"data.sources: {e.name!r} sets mapping.chat_template {e.mapping.chat_template!r}; "
                                 "how messages become text is the model's, one for all datasets: set it in data.mapping")
        return self

    @property
    def is_mixture(self) -> bool:
        return self.sources is not None

    def mixture(self) -> list[MixtureSource]:
        """The datasets to read, in order: the single-source form is a one-entry list named 'train'."""
        if self.sources is not None:
            return list(self.sources)
        assert self.source is not None  # _one_form: no sources means one source
        return [MixtureSource.model_construct(name=SINGLE_SOURCE_NAME, source=self.source, mapping=self.mapping,
                                              filters=[], weight=None, rows="all")]

    @property
    def weighted(self) -> bool:
        return bool(self.sources) and all(e.weight is not None for e in self.sources or [])


