"""The per-source stages of the data pipeline: open -> map to canonical records -> filters (in order).

A `Context` (what the spec, the tokenizer and the caller fix) goes into every stage, and each
stage returns what it made (`Filtered`, `SourceResult`). rmspec.data.pipeline runs them, then
splits, mixes and augments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rmspec.data import cache
from rmspec.data import mixture as mix
from rmspec.data import records as R
from rmspec.data.columns import (
    arrow,
    column,
    count_sources,
    mark_indices,
    materialise,
    procs,
)
from rmspec.data.columns import stable_hash as _hash
from rmspec.data.filters import Dedup, map_row_check, row_filter, sample_keep
from rmspec.data.hand_read import BAD_LINE, is_encoded
from rmspec.data.layout import Layout
from rmspec.data.map_stage import MapBatch, pair_by_prompt
from rmspec.data.presets import RowMapper
from rmspec.data.report import SourceCounts, count_rejects
from rmspec.data.sources import data_files, open_source
from rmspec.data.tokenize import TokenizeStage, token_columns
from rmspec.errors import DataError
from rmspec.spec import presets


@dataclass(frozen=True)
class Context:
    """What every stage reads, fixed before the first one runs."""

    loaded: Any  # rmspec.spec.LoadedSpec
    tokenizer: Any
    limit: int | None
    stream_dir: Path  # where a streaming source is written to Arrow

    @property
    def spec(self) -> Any:
        return self.loaded.spec

    @property
    def data(self) -> Any:
        return self.loaded.spec.data

    @property
    def approach(self) -> str:
        return self.loaded.spec.approach.row_kind  # the rows it trains on (a GRPO judge: pairs)

    @property
    def default_max(self) -> int:
        return self.loaded.spec.training.max_length

    @staticmethod
    def margin_mapped(mapping: Any) -> bool:
        preset = presets.get(mapping.preset)
        return mapping.columns.margin is not None or (preset is not None and preset.margin_from_scores)

    @cached_property
    def layout(self) -> Any:
        shape = self.spec.model.shape
        if not self.tokenizer:
            return None
        from rmspec.data.tokenize import reads_pictures

        # A vision-language model (or data with images): each picture's place is one id (rmspec.vision.marks).
        images_column = self.data.mapping.columns.images or "images" in getattr(
            presets.get(self.data.mapping.preset), "columns", {}
        )
        pictures = reads_pictures(getattr(self.tokenizer, "name_or_path", None)) or bool(images_column)
        pictures = pictures or self.visual is not None
        return Layout(self.tokenizer, self.data.mapping.chat_template, shape.architecture if shape else None, pictures)

    @cached_property
    def config_key(self) -> str:
        return cache.config_key(self.data, self.spec.approach, self.default_max, self.limit)

    @cached_property
    def tokenizer_key(self) -> str:  # computed once, where a fingerprint first needs it
        key = cache.tokenizer_key(self.tokenizer, self.layout)
        return key if self.visual is None else _hash(key, repr(self.visual))  # images: their token rule too

    @cached_property
    def visual(self) -> Any:
        """How the max_length filter and the data report count a row's images: the Qwen2-VL rule
        (rmspec.vision.tokens.VisualCount) where it applies, else the model's own processor measured per
        image size (rmspec.vision.measured.MeasuredCount, over this tokenizer); None for text models."""
        from rmspec.data.tokenize import visual_count

        return visual_count(getattr(self.tokenizer, "name_or_path", None), self.spec.model.vision, self.tokenizer)


@dataclass
class Filtered:
    """The filters' output: all rows (rejects marked), what to tell the report, and the limit and
    policy of the max_length filter (None when it did not run), which the augmentation reuses."""

    ds: Any
    notes: list[str] = field(default_factory=list)
    max_tokens: int | None = None
    policy: str | None = None


@dataclass
class SourceResult:
    """One source mapped and filtered (kept and rejected rows), its counts, and the filters' output."""

    ds: Any
    counts: SourceCounts
    filtered: Filtered


def make_context(loaded: Any, tokenizer: Any, limit: int | None, cache_dir: str | Path | None = None) -> Context:
    root = Path(cache_dir) if cache_dir else cache.default_cache_dir()
    return Context(loaded, tokenizer, limit, root / "streams")


# ---------------------------------------------------------------- stages


def source_entry(name: str, source: Any, mapping: Any) -> Any:
    from rmspec.spec.data import MixtureSource

    return MixtureSource.model_construct(name=name, source=source, mapping=mapping, filters=[], weight=None, rows="all")


def where_of(ctx: Context, i: int) -> str:
    return f"data.sources[{i}]" if ctx.data.is_mixture else "data"


def read_sources(ctx: Context, entries: list[Any]) -> tuple[dict[str, SourceResult], list[str], bool, dict[str, int]]:
    """Every dataset of the spec, mapped and filtered: (results by name, notes, whether they were
    interleaved as a stream, rows of sized datasets the stream never drew)."""
    import datasets

    opened = [
        open_source(e.source, ctx.loaded.base_dir, limit=ctx.limit, where=f"{where_of(ctx, i)}.source")
        for i, e in enumerate(entries)
    ]
    streaming = any(isinstance(ds, datasets.IterableDataset) for ds in opened)
    if not (streaming and ctx.data.weighted):
        return (
            {e.name: read_source(ctx, e, where_of(ctx, i), ds) for i, (e, ds) in enumerate(zip(entries, opened))},
            [],
            False,
            {},
        )
    streams, feats = [], None
    for i, (e, ds) in enumerate(zip(entries, opened)):
        stream, kind, feats = map_rows(ctx, e, ds, where_of(ctx, i), as_stream=True)
        if kind != ctx.approach:
            raise DataError(
                f"{where_of(ctx, i)}.mapping.pair_by: pairs by prompt need the whole dataset, which a "
                "mixture with a streaming dataset does not read at once",
                "mix by rows instead of weights, or prepare this dataset as pairs beforehand",
            )
        streams.append(stream)
    seed, strategy = ctx.data.split.seed, ctx.data.stopping_strategy
    weights = [e.weight for e in entries]
    mixed = mix.interleave(streams, weights, seed, strategy, feats, ctx.stream_dir)
    out, not_drawn = {}, {}
    for e, ds in zip(entries, opened):
        part = mix.part_of(mixed, e.name)
        read = mix.drawn_rows(part)
        out[e.name] = filter_source(ctx, e, part, read)
        if not isinstance(ds, datasets.IterableDataset):
            not_drawn[e.name] = len(ds) - read
    note = (
        f"datasets mixed by datasets.interleave_datasets(probabilities={weights}, seed={seed}, "
        f"stopping_strategy={strategy!r}) before the split: rows per dataset follow the weights in expectation"
    )
    return out, [note], True, not_drawn


def read_source(ctx: Context, entry: Any, where: str, ds: Any = None) -> SourceResult:
    """All records of one dataset (kept and rejected), mapped and filtered; and its counts."""
    if ds is None:
        ds = open_source(entry.source, ctx.loaded.base_dir, limit=ctx.limit, where=f"{where}.source")
    mapped, kind, _ = map_rows(ctx, entry, ds, where)
    import datasets

    rows_read = count_sources(mapped) if isinstance(ds, datasets.IterableDataset) else len(ds)
    if kind != ctx.approach:  # helpsteer2 with pair_by: scored responses -> pairs per prompt
        mapped = pair_by_prompt(mapped, entry.mapping.pair_by)
    return filter_source(ctx, entry, mapped, rows_read)


def map_rows(ctx: Context, entry: Any, ds: Any, where: str, as_stream: bool = False) -> tuple[Any, str, Any]:
    """(canonical records of one dataset, the approach its mapping gives, their features): a
    Dataset, or a stream (a streaming source, written to Arrow unless `as_stream`)."""
    import datasets

    streaming = isinstance(ds, datasets.IterableDataset)
    columns = ds.column_names if not streaming else (ds.column_names or list(next(iter(ds)).keys()))
    mapper = RowMapper(
        entry.mapping,
        ctx.spec.approach,
        [c for c in columns if c != BAD_LINE],
        where=f"{where}.mapping",
        data_files=data_files(entry.source, ctx.loaded.base_dir),
        image_options=ctx.data.images,  # data.images: downloads and limits, one for every dataset
    )
    kind = mapper.output_approach()
    feats = R.features(kind, images=mapper.images is not None)
    fn = MapBatch(mapper, kind, is_encoded(ds), entry.name)
    if as_stream:
        stream = ds if streaming else ds.to_iterable_dataset()
        return stream.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats), kind, feats
    if streaming:
        mapped_iter = ds.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats)
        return materialise(mapped_iter, feats, ctx.stream_dir), kind, feats
    rows = len(ds)
    # Pictures named by path are part of the rows: a rewritten one must not be served from datasets' cache.
    pictures = cache.source_pictures(ds, mapper.images.column, mapper.images.settings.base_dir) if mapper.images else ""
    mapped = ds.map(
        fn,
        batched=True,
        with_indices=True,
        remove_columns=columns,
        features=feats,
        new_fingerprint=_hash(ds._fingerprint, ctx.config_key, "map", entry.name, *([pictures] if pictures else [])),
        num_proc=procs(rows, ctx.data.num_proc),
        desc=f"mapping {entry.name}",
    )
    return mapped, kind, feats


def filter_source(ctx: Context, entry: Any, mapped: Any, rows_read: int) -> SourceResult:
    filtered = apply_filters(ctx, mapped, entry)
    out = filtered.ds
    by_reason, by_stage = count_rejects(arrow(out, "reject_stage"), arrow(out, "reject_reason"))
    n_rej = sum(by_reason.values())
    counts = SourceCounts(
        rows_read=rows_read,
        rows_added_by_mapping=len(out) - rows_read,
        rows_kept=len(out) - n_rej,
        rows_rejected=n_rej,
        rejected=by_reason,
        rejected_by_stage=by_stage,
    )
    return SourceResult(out, counts, filtered)


def apply_filters(ctx: Context, ds: Any, entry: Any) -> Filtered:
    """The dataset's own filters, then the spec's shared ones, in order (and a max_length filter at
    the end where the spec has none and a tokenizer is given); rows that fail are marked, not dropped."""
    result = Filtered(ds)
    specs = [*entry.filters, *ctx.data.filters]
    if ctx.tokenizer is not None and not any(f.kind == "max_length" for f in specs):
        from rmspec.spec.data import MaxLengthFilter

        specs.append(MaxLengthFilter(kind="max_length"))
        result.notes.append(
            f"no max_length filter in the spec: applied one at the end (policy truncate_prompt_left, "
            f"max {ctx.default_max} tokens)"
        )
    approach = ctx.approach
    for k, f in enumerate(specs):
        ds = result.ds
        stage = f"filter:{f.kind}"
        fp = _hash(ds._fingerprint, stage, k, f.model_dump_json(), ctx.tokenizer_key if f.kind == "max_length" else "")
        if f.kind == "max_length":
            if ctx.tokenizer is None:
                result.notes.append("max_length not applied: no tokenizer")
                continue
            limit = f.max_tokens or ctx.default_max
            stage_fn = TokenizeStage(
                ctx.layout,
                approach,
                limit,
                f.policy,
                stage,
                step_separator=ctx.spec.approach.step_suffix,
                visual=ctx.visual if "images" in ds.column_names else None,
            )
            feats = ds.features.copy()
            feats.update(token_columns(approach, ctx.layout))
            result.ds = ds.map(
                stage_fn,
                batched=True,
                features=feats,
                new_fingerprint=fp,
                num_proc=procs(len(ds), ctx.data.num_proc),
                desc="tokenizing",
            )
            result.max_tokens, result.policy = limit, f.policy
        elif f.kind == "dedup":
            result.ds = ds.map(Dedup(f.on, approach, stage), batched=True, new_fingerprint=fp, desc=stage)
        elif f.kind == "sample":
            live = [i for i, r in enumerate(column(ds, "reject_reason")) if not r]
            drop = set(live) - sample_keep(live, f.n, f.fraction, f.seed)
            result.ds = ds.map(
                mark_indices,
                batched=True,
                with_indices=True,
                new_fingerprint=fp,
                fn_kwargs={
                    "drop": drop,
                    "stage": stage,
                    "reason": "sampled_out",
                    "detail": f"not in the seeded sample (seed {f.seed})",
                },
            )
        else:
            check = row_filter(f, approach, ctx.margin_mapped(entry.mapping))
            assert check is not None  # row_filter is None only for max_length, dedup and sample (above)
            result.ds = ds.map(
                map_row_check(check, stage),
                batched=True,
                new_fingerprint=fp,
                num_proc=procs(len(ds), ctx.data.num_proc),
                desc=stage,
            )
    return result
