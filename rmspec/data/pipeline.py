"""`prepare` and `load_canonical`: source -> mapping -> filters (in order) -> split -> augment.

Rows never disappear in the middle: a stage marks a row rejected and the row travels on, so the
final counts reconcile by construction (and are checked). Everything runs on `datasets` objects
(memory-mapped Arrow on disk, batched maps, several processes for large data); a streaming source
is mapped on the fly and written to Arrow in batches, so memory stays bounded.

State is explicit: a `Context` (what the spec, the tokenizer and the caller fix) goes into every
stage, and each stage returns what it made (`Filtered`, `SourceResult`): the notes for the report
and the max_length limit and policy the augmentation reuses travel in those, not in attributes.
The prepared result is cached (rmspec.data.cache) so that a second run of the same spec loads it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rmspec.data import cache
from rmspec.data import mixture as mix
from rmspec.data import records as R
from rmspec.data.augment import augment_rows
from rmspec.data.columns import (
    alive,
    arrow,
    column,
    count_sources,
    mark_indices,
    materialise,
    output,
    procs,
    rejected,
    write_rejects,
)
from rmspec.data.columns import stable_hash as _hash
from rmspec.data.filters import Dedup, map_row_check, row_filter, sample_keep
from rmspec.data.hand_read import BAD_LINE, is_encoded
from rmspec.data.layout import Layout
from rmspec.data.map_stage import MapBatch, pair_by_prompt
from rmspec.data.presets import RowMapper
from rmspec.data.report import DataReport, SourceCounts, count_rejects
from rmspec.data.sources import open_source
from rmspec.data.split import split_rows
from rmspec.data.summarize import summarize
from rmspec.data.tokenize import TokenizeStage, token_columns
from rmspec.errors import DataError


@dataclass
class Prepared:
    train: Any  # datasets.Dataset
    validation: Any  # datasets.Dataset or None
    report: DataReport


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
        return self.loaded.spec.approach.kind

    @property
    def default_max(self) -> int:
        return self.loaded.spec.training.max_length

    @staticmethod
    def margin_mapped(mapping: Any) -> bool:
        return mapping.columns.margin is not None or mapping.preset in ("shp", "ultrafeedback")

    @cached_property
    def layout(self) -> Any:
        shape = self.spec.model.shape
        return (
            Layout(self.tokenizer, self.data.mapping.chat_template, shape.architecture if shape else None)
            if self.tokenizer
            else None
        )

    @cached_property
    def config_key(self) -> str:
        return cache.config_key(self.data, self.spec.approach, self.default_max, self.limit)

    @cached_property
    def tokenizer_key(self) -> str:  # computed once, where a fingerprint first needs it
        return cache.tokenizer_key(self.tokenizer, self.layout)


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


def prepare(
    loaded: Any,
    tokenizer: Any,
    *,
    rejects_path: str | Path | None = None,
    cache_dir: str | Path | None = None,
    limit: int | None = None,
) -> Prepared:
    """Tokenized train/validation sets for the spec's approach, its report, and the rejects file."""
    import datasets

    if tokenizer is None:
        raise DataError("prepare needs a tokenizer", "load one with AutoTokenizer.from_pretrained(model path)")
    t0 = time.time()
    ctx = make_context(loaded, tokenizer, limit, cache_dir)
    data, approach = ctx.data, ctx.approach
    cache_root = Path(cache_dir) if cache_dir else cache.default_cache_dir()
    key = cache.cache_key(
        ctx.config_key,
        ctx.tokenizer_key,
        [*(e.source for e in data.mixture()), data.split.validation_source],
        loaded.base_dir,
    )
    hit = cache_root / key if key else None
    if hit is not None and (hit / "report.json").is_file():
        return Prepared(*cache.load_cache(hit, rejects_path, t0))

    entries = data.mixture()
    results, mixed_notes, streamed, not_drawn = read_sources(ctx, entries)
    sources = {name: r.counts for name, r in results.items()}
    notes = [n for r in results.values() for n in r.filtered.notes] + mixed_notes
    rejected_parts = [(name, rejected(r.ds)) for name, r in results.items()]
    main = next(iter(results.values()))  # its max_length limit and policy serve the augmentation
    split = data.split
    kept = (
        alive(main.ds) if len(results) == 1 else datasets.concatenate_datasets([alive(r.ds) for r in results.values()])
    )
    if split.validation_source is not None:
        other = read_source(
            ctx, _entry("validation", split.validation_source, data.mapping), "data.split.validation_source"
        )
        sources["validation"] = other.counts
        notes += other.filtered.notes
        rejected_parts.append(("validation", rejected(other.ds)))
        train, validation = kept, alive(other.ds)
    else:
        parts = {name: split_rows(alive(r.ds), split) for name, r in results.items()}
        if data.is_mixture:
            parts, kept = mix.mix_parts(parts, entries, data, streamed, sources, not_drawn, rejected_parts)
        train = mix.concat([t for t, _ in parts.values()])
        held = [v for _, v in parts.values() if v is not None]
        validation = mix.concat(held) if held else None

    augmented_counts: dict[str, int] = {}
    augmented_rejected: dict[str, int] = {}
    if data.augment:
        rows = train.select_columns(list(R.features(approach))).to_list()
        made, augmented_counts = augment_rows(rows, data.augment, approach)
        if made:
            # the max_length filter ran (augmented rows need the tokenizer too): reuse its limit and policy
            assert main.filtered.max_tokens is not None and main.filtered.policy is not None
            stage = TokenizeStage(
                ctx.layout, approach, main.filtered.max_tokens, main.filtered.policy, "augment:max_length"
            )
            extra = datasets.Dataset.from_list(made, features=R.features(approach))
            extra = extra.map(stage, batched=True, features=train.features)
            augmented_rejected, _ = count_rejects(arrow(extra, "reject_stage"), arrow(extra, "reject_reason"))
            rejected_parts.append(("train-augmented", rejected(extra)))
            train = datasets.concatenate_datasets([train, alive(extra)])

    report = summarize(
        approach,
        ctx.layout,
        main.filtered.max_tokens,
        notes,
        sources,
        {"train": train, "validation": validation},
        kept,
        validation,
        augmented_counts,
        augmented_rejected,
        0.0,
    )
    report.fingerprint = key or ""
    if data.is_mixture:
        drawn = {n: sources[n].rows_train for n in results}
        available = (
            {
                n: drawn[n]
                - sources[n].rows_repeated
                + sources[n].rejected_by_stage.get(mix.SAMPLE_STAGE, {}).get("sampled_out", 0)
                for n in results
            }
            if split.validation_source is None
            else {}
        )
        report.mixture = mix.describe(entries, data.stopping_strategy, split.seed, streamed, available, drawn)
    if not report.reconciled:  # a bug, not the user's: say so loudly
        raise AssertionError(f"data counts do not reconcile: {report.to_json()['sources']}")
    train = output(train, approach, data.is_mixture)
    validation = output(validation, approach, data.is_mixture) if validation is not None else None
    report.seconds = round(time.time() - t0, 2)
    if rejects_path:
        write_rejects(rejects_path, rejected_parts)
    if len(train) == 0:
        where = f" (see {rejects_path})" if rejects_path else ""
        raise DataError(
            f"no training rows left after mapping and filters: rejected {report.rejected}{where}",
            "check the mapping (preset, columns) against the data, and the filters' limits",
        )
    if hit is not None:
        cache.save_cache(hit, train, validation, report, rejected_parts)
    return Prepared(train, validation, report)


def load_canonical(
    loaded: Any, tokenizer: Any = None, *, limit: int | None = None, rejects_path: str | Path | None = None
) -> tuple[Any, DataReport]:
    """Mapped and filtered rows of the main source, before the split (what `data preview` shows).

    Without a tokenizer the max_length filter cannot run and is skipped (the report says so);
    with one, rows carry the prompt as the model sees it (chat template applied) and token ids."""
    ctx = make_context(loaded, tokenizer, limit)
    t0 = time.time()
    results, notes, _, _ = read_sources(ctx, ctx.data.mixture())
    main = next(iter(results.values()))
    kept = mix.concat([alive(r.ds) for r in results.values()])
    if rejects_path:
        write_rejects(rejects_path, [(name, rejected(r.ds)) for name, r in results.items()])
    notes = [n for r in results.values() for n in r.filtered.notes] + notes
    report = summarize(
        ctx.approach,
        ctx.layout,
        main.filtered.max_tokens,
        notes,
        {name: r.counts for name, r in results.items()},
        {"train": kept},
        kept,
        None,
        {},
        {},
        time.time() - t0,
    )
    return kept, report


# ---------------------------------------------------------------- stages


def _entry(name: str, source: Any, mapping: Any) -> Any:
    from rmspec.spec.data import MixtureSource

    return MixtureSource.model_construct(name=name, source=source, mapping=mapping, filters=[], weight=None, rows="all")


def _where(ctx: Context, i: int) -> str:
    return f"data.sources[{i}]" if ctx.data.is_mixture else "data"


def read_sources(ctx: Context, entries: list[Any]) -> tuple[dict[str, SourceResult], list[str], bool, dict[str, int]]:
    """Every dataset of the spec, mapped and filtered: (results by name, notes, whether they were
    interleaved as a stream, rows of sized datasets the stream never drew)."""
    import datasets

    opened = [
        open_source(e.source, ctx.loaded.base_dir, limit=ctx.limit, where=f"{_where(ctx, i)}.source")
        for i, e in enumerate(entries)
    ]
    streaming = any(isinstance(ds, datasets.IterableDataset) for ds in opened)
    if not (streaming and ctx.data.weighted):
        return (
            {e.name: read_source(ctx, e, _where(ctx, i), ds) for i, (e, ds) in enumerate(zip(entries, opened))},
            [],
            False,
            {},
        )
    streams, feats = [], None
    for i, (e, ds) in enumerate(zip(entries, opened)):
        stream, kind, feats = map_rows(ctx, e, ds, _where(ctx, i), as_stream=True)
        if kind != ctx.approach:
            raise DataError(
                f"{_where(ctx, i)}.mapping.pair_by: pairs by prompt need the whole dataset, which a "
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
        entry.mapping, ctx.spec.approach, [c for c in columns if c != BAD_LINE], where=f"{where}.mapping"
    )
    kind = mapper.output_approach()
    feats = R.features(kind)
    fn = MapBatch(mapper, kind, is_encoded(ds), entry.name)
    if as_stream:
        stream = ds if streaming else ds.to_iterable_dataset()
        return stream.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats), kind, feats
    if streaming:
        mapped_iter = ds.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats)
        return materialise(mapped_iter, feats, ctx.stream_dir), kind, feats
    rows = len(ds)
    mapped = ds.map(
        fn,
        batched=True,
        with_indices=True,
        remove_columns=columns,
        features=feats,
        new_fingerprint=_hash(ds._fingerprint, ctx.config_key, "map", entry.name),
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
                step_separator=getattr(ctx.spec.approach, "step_separator", None),
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
