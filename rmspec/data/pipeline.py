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
from rmspec.data.split import validation_mask
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

    @property
    def margin_mapped(self) -> bool:
        return self.data.mapping.columns.margin is not None or self.data.mapping.preset in ("shp", "ultrafeedback")

    @cached_property
    def layout(self) -> Any:
        shape = self.spec.model.shape
        return Layout(self.tokenizer, self.data.mapping.chat_template, shape.architecture if shape else None) \
            if self.tokenizer else None

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


def prepare(loaded: Any, tokenizer: Any, *, rejects_path: str | Path | None = None, cache_dir: str | Path | None = None,
            limit: int | None = None) -> Prepared:
    """Tokenized train/validation sets for the spec's approach, its report, and the rejects file."""
    import datasets

    if tokenizer is None:
        raise DataError("prepare needs a tokenizer", "load one with AutoTokenizer.from_pretrained(model path)")
    t0 = time.time()
    ctx = make_context(loaded, tokenizer, limit, cache_dir)
    data, approach = ctx.data, ctx.approach
    cache_root = Path(cache_dir) if cache_dir else cache.default_cache_dir()
    key = cache.cache_key(ctx.config_key, ctx.tokenizer_key, [data.source, data.split.validation_source],
                          loaded.base_dir)
    hit = cache_root / key if key else None
    if hit is not None and (hit / "report.json").is_file():
        return Prepared(*cache.load_cache(hit, rejects_path, t0))

    main = read_source(ctx, "train", data.source, "data.source")
    sources = {"train": main.counts}
    notes = list(main.filtered.notes)
    rejected_parts = [("train", rejected(main.ds))]
    kept = alive(main.ds)
    split = data.split
    if split.validation_source is not None:
        other = read_source(ctx, "validation", split.validation_source, "data.split.validation_source")
        sources["validation"] = other.counts
        notes += other.filtered.notes
        rejected_parts.append(("validation", rejected(other.ds)))
        train, validation = kept, alive(other.ds)
    elif split.validation_fraction:
        strata = None
        if split.stratify_by:
            if split.stratify_by not in kept.column_names:
                raise DataError(f"data.split.stratify_by: no canonical column {split.stratify_by!r}",
                                "stratify by group (map the column with data.mapping.columns.group)")
            strata = [str(v) for v in column(kept, split.stratify_by)]
        mask = validation_mask(column(kept, "prompt_key"), split.validation_fraction, split.seed, strata=strata,
                               group_by_prompt=split.group_by_prompt)
        train = kept.select([i for i, v in enumerate(mask) if not v])
        validation = kept.select([i for i, v in enumerate(mask) if v])
    else:
        train, validation = kept, None

    augmented_counts, augmented_rejected = {}, {}
    if data.augment:
        rows = train.select_columns(list(R.features(approach))).to_list()
        made, augmented_counts = augment_rows(rows, data.augment, approach)
        if made:
            stage = TokenizeStage(ctx.layout, approach, main.filtered.max_tokens, main.filtered.policy,
                                  "augment:max_length")
            extra = datasets.Dataset.from_list(made, features=R.features(approach))
            extra = extra.map(stage, batched=True, features=train.features)
            augmented_rejected, _ = count_rejects(arrow(extra, "reject_stage"), arrow(extra, "reject_reason"))
            rejected_parts.append(("train-augmented", rejected(extra)))
            train = datasets.concatenate_datasets([train, alive(extra)])

    report = summarize(approach, ctx.layout, main.filtered.max_tokens, notes, sources,
                       {"train": train, "validation": validation}, kept, validation, augmented_counts,
                       augmented_rejected, 0.0)
    report.fingerprint = key or ""
    if not report.reconciled:  # a bug, not the user's: say so loudly
        raise AssertionError(f"data counts do not reconcile: {report.to_json()['sources']}")
    train = output(train, approach)
    validation = output(validation, approach) if validation is not None else None
    report.seconds = round(time.time() - t0, 2)
    if rejects_path:
        write_rejects(rejects_path, rejected_parts)
    if len(train) == 0:
        where = f" (see {rejects_path})" if rejects_path else ""
        raise DataError(f"no training rows left after mapping and filters: rejected {report.rejected}{where}",
                        "check the mapping (preset, columns) against the data, and the filters' limits")
    if hit is not None:
        cache.save_cache(hit, train, validation, report, rejected_parts)
    return Prepared(train, validation, report)


def load_canonical(loaded: Any, tokenizer: Any = None, *, limit: int | None = None,
                   rejects_path: str | Path | None = None) -> tuple[Any, DataReport]:
    """Mapped and filtered rows of the main source, before the split (what `data preview` shows).

    Without a tokenizer the max_length filter cannot run and is skipped (the report says so);
    with one, rows carry the prompt as the model sees it (chat template applied) and token ids."""
    ctx = make_context(loaded, tokenizer, limit)
    t0 = time.time()
    main = read_source(ctx, "train", loaded.spec.data.source, "data.source")
    kept = alive(main.ds)
    if rejects_path:
        write_rejects(rejects_path, [("train", rejected(main.ds))])
    report = summarize(ctx.approach, ctx.layout, main.filtered.max_tokens, main.filtered.notes, {"train": main.counts},
                       {"train": kept}, kept, None, {}, {}, time.time() - t0)
    return kept, report


# ---------------------------------------------------------------- stages


def read_source(ctx: Context, name: str, source_spec: Any, where: str) -> SourceResult:
    """All records of one source (kept and rejected), mapped and filtered; and its counts."""
    import datasets

    ds = open_source(source_spec, ctx.loaded.base_dir, limit=ctx.limit, where=where)
    streaming = isinstance(ds, datasets.IterableDataset)
    columns = ds.column_names if not streaming else (ds.column_names or list(next(iter(ds)).keys()))
    mapper = RowMapper(ctx.data.mapping, ctx.spec.approach, [c for c in columns if c != BAD_LINE])
    kind = mapper.output_approach()
    feats = R.features(kind)
    fn = MapBatch(mapper, kind, is_encoded(ds))
    if streaming:
        mapped_iter = ds.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats)
        mapped = materialise(mapped_iter, feats, ctx.stream_dir)
        rows_read = count_sources(mapped)
    else:
        rows_read = len(ds)
        mapped = ds.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats,
                        new_fingerprint=_hash(ds._fingerprint, ctx.config_key, "map"), num_proc=procs(rows_read),
                        desc=f"mapping {name}")
    if kind != ctx.approach:  # helpsteer2 with pair_by: scored responses -> pairs per prompt
        mapped = pair_by_prompt(mapped, ctx.data.mapping.pair_by)
    filtered = apply_filters(ctx, mapped)
    out = filtered.ds
    by_reason, by_stage = count_rejects(arrow(out, "reject_stage"), arrow(out, "reject_reason"))
    n_rej = sum(by_reason.values())
    counts = SourceCounts(rows_read=rows_read, rows_added_by_mapping=len(out) - rows_read,
                          rows_kept=len(out) - n_rej, rows_rejected=n_rej, rejected=by_reason,
                          rejected_by_stage=by_stage)
    return SourceResult(out, counts, filtered)


def apply_filters(ctx: Context, ds: Any) -> Filtered:
    """The spec's filters in order (and a max_length filter at the end where the spec has none and
    a tokenizer is given); rows that fail are marked, not dropped."""
    result = Filtered(ds)
    specs = list(ctx.data.filters)
    if ctx.tokenizer is not None and not any(f.kind == "max_length" for f in specs):
        from rmspec.spec.data import MaxLengthFilter

        specs.append(MaxLengthFilter(kind="max_length"))
        result.notes.append(f"no max_length filter in the spec: applied one at the end (policy truncate_prompt_left, "
                            f"max {ctx.default_max} tokens)")
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
            stage_fn = TokenizeStage(ctx.layout, approach, limit, f.policy, stage,
                                     step_separator=getattr(ctx.spec.approach, "step_separator", None))
            feats = ds.features.copy()
            feats.update(token_columns(approach, ctx.layout))
            result.ds = ds.map(stage_fn, batched=True, features=feats, new_fingerprint=fp, num_proc=procs(len(ds)),
                               desc="tokenizing")
            result.max_tokens, result.policy = limit, f.policy
        elif f.kind == "dedup":
            result.ds = ds.map(Dedup(f.on, approach, stage), batched=True, new_fingerprint=fp, desc=stage)
        elif f.kind == "sample":
            live = [i for i, r in enumerate(column(ds, "reject_reason")) if not r]
            drop = set(live) - sample_keep(live, f.n, f.fraction, f.seed)
            result.ds = ds.map(mark_indices, batched=True, with_indices=True, new_fingerprint=fp,
                               fn_kwargs={"drop": drop, "stage": stage, "reason": "sampled_out",
                                          "detail": f"not in the seeded sample (seed {f.seed})"})
        else:
            check = row_filter(f, approach, ctx.margin_mapped)
            result.ds = ds.map(map_row_check(check, stage), batched=True, new_fingerprint=fp, num_proc=procs(len(ds)),
                               desc=stage)
    return result
