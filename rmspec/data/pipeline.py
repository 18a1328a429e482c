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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.data import cache
from rmspec.data import mixture as mix
from rmspec.data import records as R
from rmspec.data.augment import augment_rows
from rmspec.data.columns import alive, arrow, first_details, output, rejected, write_rejects
from rmspec.data.report import DataReport, count_rejects
from rmspec.data.source_stage import make_context, read_source, read_sources, source_entry
from rmspec.data.split import require_validation, split_rows, validation_on
from rmspec.data.summarize import summarize
from rmspec.data.tokenize import TokenizeStage
from rmspec.errors import DataError
from rmspec.vision.tokens import read_as_stored_note, run_settings
from rmspec.vision.tokens import summary as image_summary


@dataclass
class Prepared:
    train: Any  # datasets.Dataset
    validation: Any  # datasets.Dataset or None
    report: DataReport


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
    if hit is not None and (hit / "report.json").is_file() and cache.pictures_unchanged(hit):
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
    split_kept: list[Any] = []  # the rows each dataset split (none: a separate validation source)
    if split.validation_source is not None:
        other = read_source(
            ctx, source_entry("validation", split.validation_source, data.mapping), "data.split.validation_source"
        )
        sources["validation"] = other.counts
        notes += other.filtered.notes
        rejected_parts.append(("validation", rejected(other.ds)))
        train, validation = kept, alive(other.ds)
    else:
        split_kept = [alive(r.ds) for r in results.values()]
        parts = {name: split_rows(k, split) for name, k in zip(results, split_kept)}
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
    if "images" in train.column_names:  # rows with images: counts, sizes, visual tokens (rmspec.vision.tokens)
        refs = list(train["images"]) + (list(validation["images"]) if validation is not None else [])
        # The processor's settings under model.vision's pixel bounds, as training reads the images.
        settings = run_settings(getattr(tokenizer, "name_or_path", None), loaded.spec.model.vision)
        report.images = image_summary([r or [] for r in refs], settings, ctx.visual)  # other families: measured
        if report.images.get("read_as_stored"):  # pictures vLLM and viewers would show otherwise: said, not silent
            report.notes.append(read_as_stored_note(report.images["read_as_stored"]))
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
        first = "; ".join(f"{reason}: {detail}" for reason, detail in first_details(rejected_parts).items())
        raise DataError(
            f"no training rows left after mapping and filters: rejected {report.rejected}{where}; the first of "
            f"each: {first}",
            "check the mapping (preset, columns) against the data, and the filters' limits"
            + ("" if rejects_path else "; `rmspec data report SPEC --rejects FILE` writes every row with its reason"),
        )
    # The split asked for validation rows and holds none: stop here, not after training (exit 2, the cause).
    require_validation(
        validation,
        split,
        split_kept,
        sources["validation"].rejected if "validation" in sources else None,
        on=validation_on(loaded.spec),
    )
    if validation is not None and not len(validation):  # nothing held out (validation off): none, not an empty set
        validation = None
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
