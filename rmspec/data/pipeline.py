"""`prepare` and `load_canonical`: source -> mapping -> filters (in order) -> split -> augment.

Rows never disappear in the middle: a stage marks a row rejected and the row travels on, so the
final counts reconcile by construction (and are checked). Everything runs on `datasets` objects
(memory-mapped Arrow on disk, batched maps, several processes for large data); a streaming source
is mapped on the fly and written to Arrow in batches, so memory stays bounded.

The prepared result is cached under `cache_dir/<fingerprint>/` where the fingerprint covers the
source data, the `data:` section, the approach, the max length and the tokenizer: a second run of
the same spec loads it instead of preparing again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.data import records as R
from rmspec.data.augment import augment_rows
from rmspec.data.filters import Dedup, map_row_check, row_filter, sample_keep
from rmspec.data.layout import Layout
from rmspec.data.presets import RowMapper
from rmspec.data.records import GENERATIVE, PAIRS, POINTWISE, PROCESS, Reject
from rmspec.data.report import DataReport, SourceCounts, count_rejects, distribution, length_heuristic
from rmspec.data.sources import open_source
from rmspec.data.split import validation_mask
from rmspec.data.tokenize import TokenizeStage, token_columns
from rmspec.errors import DataError

def _code_version() -> str:
    """Hash of this package's code: a changed pipeline never reuses results cached by an older one."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


PIPELINE_VERSION = _code_version()
PARALLEL_FROM_ROWS = 100_000  # below this, extra processes cost more than they save

OUTPUT_COLUMNS = {
    PAIRS: ["id", "group", "augmented", "prompt", "chosen", "rejected", "margin", "chosen_input_ids", "rejected_input_ids",
            "chosen_token_type_ids", "rejected_token_type_ids"],
    POINTWISE: ["id", "group", "augmented", "prompt", "response", "scores", "input_ids", "token_type_ids"],
    GENERATIVE: ["id", "group", "augmented", "messages", "input_ids", "labels"],
    PROCESS: ["id", "group", "augmented", "prompt", "steps", "step_labels", "input_ids", "labels", "token_type_ids"],
}


@dataclass
class Prepared:
    train: Any  # datasets.Dataset
    validation: Any  # datasets.Dataset or None
    report: DataReport


def prepare(loaded: Any, tokenizer: Any, *, rejects_path: str | Path | None = None, cache_dir: str | Path | None = None,
            limit: int | None = None) -> Prepared:
    """Tokenized train/validation sets for the spec's approach, its report, and the rejects file."""
    return _Pipeline(loaded, tokenizer, limit).prepare(rejects_path, cache_dir)


def load_canonical(loaded: Any, tokenizer: Any = None, *, limit: int | None = None,
                   rejects_path: str | Path | None = None) -> tuple[Any, DataReport]:
    """Mapped and filtered rows of the main source, before the split (what `data preview` shows).

    Without a tokenizer the max_length filter cannot run and is skipped (the report says so);
    with one, rows carry the prompt as the model sees it (chat template applied) and token ids."""
    pipe = _Pipeline(loaded, tokenizer, limit)
    t0 = time.time()
    ds, counts = pipe.source("train", loaded.spec.data.source, "data.source")
    kept = _alive(ds)
    if rejects_path:
        _write_rejects(rejects_path, [("train", _rejected(ds))])
    report = pipe.report({"train": counts}, {"train": kept}, kept, None, {}, {}, time.time() - t0)
    return kept, report


def default_cache_dir() -> Path:
    root = os.environ.get("RMSPEC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rmspec")
    return Path(root) / "data"


class _Pipeline:
    def __init__(self, loaded: Any, tokenizer: Any, limit: int | None):
        self.loaded = loaded
        self.spec = loaded.spec
        self.data = loaded.spec.data
        self.approach = loaded.spec.approach.kind
        self.tokenizer = tokenizer
        self.limit = limit
        self.notes: list[str] = []
        shape = loaded.spec.model.shape
        self.layout = Layout(tokenizer, self.data.mapping.chat_template, shape.architecture if shape else None) if tokenizer else None
        self.default_max = loaded.spec.training.max_length
        self.stream_dir = default_cache_dir() / "streams"
        margin_col = self.data.mapping.columns.margin
        self.margin_mapped = margin_col is not None or self.data.mapping.preset in ("shp", "ultrafeedback")

    # ------------------------------------------------------------ one source

    def source(self, name: str, source_spec: Any, where: str) -> tuple[Any, SourceCounts]:
        """All records of one source (kept and rejected), filtered; and its counts."""
        import datasets

        ds = open_source(source_spec, self.loaded.base_dir, limit=self.limit, where=where)
        streaming = isinstance(ds, datasets.IterableDataset)
        columns = ds.column_names if not streaming else (ds.column_names or list(next(iter(ds)).keys()))
        from rmspec.data.hand_read import BAD_LINE, is_encoded

        encoded = is_encoded(ds)
        mapper = RowMapper(self.data.mapping, self.spec.approach, [c for c in columns if c != BAD_LINE])
        kind = mapper.output_approach()
        feats = R.features(kind)
        fn = _MapBatch(mapper, kind, encoded)
        if streaming:
            mapped_iter = ds.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats)
            mapped = _materialise(mapped_iter, feats, self.stream_dir)
            rows_read = _count_sources(mapped)
        else:
            rows_read = len(ds)
            mapped = ds.map(fn, batched=True, with_indices=True, remove_columns=columns, features=feats,
                            new_fingerprint=_hash(ds._fingerprint, self._config_key(), "map"), num_proc=_procs(rows_read),
                            desc=f"mapping {name}")
        if kind != self.approach:  # helpsteer2 with pair_by: scored responses -> pairs per prompt
            mapped = pair_by_prompt(mapped, self.data.mapping.pair_by)
        filtered = self.filters(mapped)
        rejected, by_stage = count_rejects(arrow(filtered, "reject_stage"), arrow(filtered, "reject_reason"))
        n_rej = sum(rejected.values())
        counts = SourceCounts(rows_read=rows_read, rows_added_by_mapping=len(filtered) - rows_read,
                              rows_kept=len(filtered) - n_rej, rows_rejected=n_rej, rejected=rejected,
                              rejected_by_stage=by_stage)
        return filtered, counts

    def filters(self, ds: Any) -> Any:
        specs = list(self.data.filters)
        if self.tokenizer is not None and not any(f.kind == "max_length" for f in specs):
            from rmspec.spec.data import MaxLengthFilter

            specs.append(MaxLengthFilter(kind="max_length"))
            self.notes.append(f"no max_length filter in the spec: applied one at the end (policy truncate_prompt_left, "
                              f"max {self.default_max} tokens)")
        for k, f in enumerate(specs):
            stage = f"filter:{f.kind}"
            fp = _hash(ds._fingerprint, stage, k, f.model_dump_json(), self._tokenizer_key() if f.kind == "max_length" else "")
            if f.kind == "max_length":
                if self.tokenizer is None:
                    self.notes.append("max_length not applied: no tokenizer")
                    continue
                limit = f.max_tokens or self.default_max
                stage_fn = TokenizeStage(self.layout, self.approach, limit, f.policy, stage,
                                         step_separator=getattr(self.spec.approach, "step_separator", None))
                feats = ds.features.copy()
                feats.update(token_columns(self.approach, self.layout))
                ds = ds.map(stage_fn, batched=True, features=feats, new_fingerprint=fp, num_proc=_procs(len(ds)),
                            desc="tokenizing")
                self.max_tokens = limit
                self.policy = f.policy
            elif f.kind == "dedup":
                ds = ds.map(Dedup(f.on, self.approach, stage), batched=True, new_fingerprint=fp, desc=stage)
            elif f.kind == "sample":
                alive = [i for i, r in enumerate(column(ds, "reject_reason")) if not r]
                keep = sample_keep(alive, f.n, f.fraction, f.seed)
                drop = set(alive) - keep
                ds = ds.map(_mark_indices, batched=True, with_indices=True, new_fingerprint=fp,
                            fn_kwargs={"drop": drop, "stage": stage, "reason": "sampled_out",
                                       "detail": f"not in the seeded sample (seed {f.seed})"})
            else:
                check = row_filter(f, self.approach, self.margin_mapped)
                ds = ds.map(map_row_check(check, stage), batched=True, new_fingerprint=fp, num_proc=_procs(len(ds)),
                            desc=stage)
        return ds

    # ------------------------------------------------------------ the whole job

    def prepare(self, rejects_path: str | Path | None, cache_dir: str | Path | None) -> Prepared:
        import datasets

        if self.tokenizer is None:
            raise DataError("prepare needs a tokenizer", "load one with AutoTokenizer.from_pretrained(model path)")
        t0 = time.time()
        cache_root = Path(cache_dir) if cache_dir else default_cache_dir()
        self.stream_dir = cache_root / "streams"
        key = self._cache_key()
        hit = cache_root / key if key else None
        if hit is not None and (hit / "report.json").is_file():
            return self._from_cache(hit, rejects_path, t0)

        ds, counts = self.source("train", self.data.source, "data.source")
        sources = {"train": counts}
        rejected_parts = [("train", _rejected(ds))]
        kept = _alive(ds)
        split = self.data.split
        if split.validation_source is not None:
            vds, vcounts = self.source("validation", split.validation_source, "data.split.validation_source")
            sources["validation"] = vcounts
            rejected_parts.append(("validation", _rejected(vds)))
            train, validation = kept, _alive(vds)
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
        if self.data.augment:
            base_cols = [c for c in R.features(self.approach)]
            rows = train.select_columns(base_cols).to_list()
            made, augmented_counts = augment_rows(rows, self.data.augment, self.approach)
            if made:
                extra = datasets.Dataset.from_list(made, features=R.features(self.approach))
                extra = extra.map(TokenizeStage(self.layout, self.approach, self.max_tokens, self.policy, "augment:max_length"),
                                  batched=True, features=train.features)
                augmented_rejected, _ = count_rejects(arrow(extra, "reject_stage"), arrow(extra, "reject_reason"))
                rejected_parts.append(("train-augmented", _rejected(extra)))
                train = datasets.concatenate_datasets([train, _alive(extra)])

        report = self.report(sources, {"train": train, "validation": validation}, kept, validation,
                             augmented_counts, augmented_rejected, 0.0)
        report.fingerprint = key or ""
        if not report.reconciled:  # a bug, not the user's: say so loudly
            raise AssertionError(f"data counts do not reconcile: {report.to_json()['sources']}")
        train = _output(train, self.approach)
        validation = _output(validation, self.approach) if validation is not None else None
        report.seconds = round(time.time() - t0, 2)
        if rejects_path:
            _write_rejects(rejects_path, rejected_parts)
        if len(train) == 0:
            where = f" (see {rejects_path})" if rejects_path else ""
            raise DataError(f"no training rows left after mapping and filters: rejected {report.rejected}{where}",
                            "check the mapping (preset, columns) against the data, and the filters' limits")
        if hit is not None:
            self._save_cache(hit, train, validation, report, rejected_parts)
        return Prepared(train, validation, report)

    # ------------------------------------------------------------ report

    def report(self, sources: dict[str, SourceCounts], splits: dict[str, Any], kept: Any, validation: Any,
               augmented: dict[str, int], augmented_rejected: dict[str, int], seconds: float) -> DataReport:
        report = DataReport(approach=self.approach, layout=self.layout.kind if self.layout else None,
                            max_length=getattr(self, "max_tokens", None),
                            sources=sources, splits={k: len(v) for k, v in splits.items() if v is not None},
                            augmented=augmented, augmented_rejected=augmented_rejected, notes=list(dict.fromkeys(self.notes)),
                            seconds=round(seconds, 2))
        pool = kept
        if validation is not None and "validation" in sources:  # a separate validation source: both sides
            import datasets

            pool = datasets.concatenate_datasets([kept, validation])
        n = len(pool)
        cols = pool.column_names
        if self.approach == PAIRS and "chosen_tokens" in cols:
            chosen, rejected = numbers(pool, "chosen_tokens"), numbers(pool, "rejected_tokens")
            report.length_heuristic_accuracy = length_heuristic(chosen, rejected)
            prompts = numbers(pool, "prompt_tokens")
            # Responses alone, and whole sequences (special tokens included, before any cut) against the limit.
            report.token_lengths = {"prompt": distribution(prompts, None),
                                    "chosen": distribution(chosen, None),
                                    "rejected": distribution(rejected, None),
                                    "chosen_sequence": distribution(numbers(pool, "chosen_length"), report.max_length),
                                    "rejected_sequence": distribution(numbers(pool, "rejected_length"), report.max_length)}
        elif self.approach == POINTWISE and "response_tokens" in cols:
            report.token_lengths = {"prompt": distribution(numbers(pool, "prompt_tokens"), None),
                                    "response": distribution(numbers(pool, "response_tokens"), None),
                                    "sequence": distribution(numbers(pool, "length"), report.max_length)}
        elif self.approach == GENERATIVE and "total_tokens" in cols:
            report.token_lengths = {"sequence": distribution(numbers(pool, "total_tokens"), report.max_length)}
        elif self.approach == PROCESS and "total_tokens" in cols:
            from rmspec.data.steps import step_report

            report.token_lengths = {"prompt": distribution(numbers(pool, "prompt_tokens"), None),
                                    "sequence": distribution(numbers(pool, "total_tokens"), report.max_length)}
            report.steps = step_report(pool)
        if "truncated" in cols and n:
            report.truncation_rate = round(float(numbers(pool, "truncated").sum()) / n, 4)
        if "shared_prefix_cut" in cols and n:
            report.shared_prefix_cut_pairs = int(numbers(pool, "shared_prefix_cut").sum())
        if n:
            import numpy as np

            report.duplicate_rate = round(1 - np.unique(_row_hashes(pool, self.approach)).size / n, 4)
        if self.approach == PAIRS and n:
            import pyarrow.compute as pc

            report.ties = int(pc.sum(pc.equal(arrow(pool, "score_chosen"), arrow(pool, "score_rejected"))).as_py() or 0)
        report.groups = _groups(pool, validation if "validation" not in sources else None, self.approach)
        return report

    # ------------------------------------------------------------ cache

    def _config_key(self) -> str:
        return _hash(PIPELINE_VERSION, self.data.model_dump_json(), self.spec.approach.model_dump_json(),
                     self.default_max, self.limit)

    def _tokenizer_key(self) -> str:
        tok = self.tokenizer
        if tok is None:
            return ""
        if not hasattr(self, "_tok_key"):
            try:
                backend = tok.backend_tokenizer.to_str()
            except Exception:  # slow tokenizers: the vocabulary stands in
                backend = json.dumps(sorted(tok.get_vocab().items()))
            self._tok_key = _hash(type(tok).__name__, backend, getattr(tok, "chat_template", None) or "",
                                  json.dumps(tok.special_tokens_map, sort_keys=True, default=str), self.layout.kind)
        return self._tok_key

    def _cache_key(self) -> str | None:
        """None when the data has no stable identity (a live database, an unpinned stream)."""
        parts = [self._config_key(), self._tokenizer_key()]
        for src in [self.data.source, self.data.split.validation_source]:
            if src is None:
                continue
            ident = _source_identity(src, self.loaded.base_dir)
            if ident is None:
                return None
            parts.append(ident)
        return _hash(*parts)

    def _save_cache(self, folder: Path, train: Any, validation: Any, report: DataReport, rejected_parts) -> None:
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        train.save_to_disk(str(tmp / "train"))
        if validation is not None:
            validation.save_to_disk(str(tmp / "validation"))
        _write_rejects(tmp / "rejects.jsonl", rejected_parts)
        (tmp / "report.json").write_text(json.dumps(report.to_json(), indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)

    def _from_cache(self, folder: Path, rejects_path: str | Path | None, t0: float) -> Prepared:
        import datasets

        report = DataReport.from_json(json.loads((folder / "report.json").read_text()))
        report.cached = True
        report.seconds = round(time.time() - t0, 2)
        train = datasets.load_from_disk(str(folder / "train"))
        validation = datasets.load_from_disk(str(folder / "validation")) if (folder / "validation").is_dir() else None
        if rejects_path:
            Path(rejects_path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / "rejects.jsonl", rejects_path)
        return Prepared(train, validation, report)


# ---------------------------------------------------------------- helpers


class _MapBatch:
    """Batched map: source rows -> canonical records (or one reject record per unfit row)."""

    def __init__(self, mapper: RowMapper, kind: str, encoded: bool = False):
        self.mapper = mapper
        self.kind = kind
        self.encoded = encoded  # rows read by hand: every value JSON-encoded (hand_read.json_lines_by_hand)
        self.names = list(R.features(kind))

    def __call__(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        out: dict[str, list] = {k: [] for k in self.names}
        keys = list(batch)
        for j, index in enumerate(indices):
            row = {k: batch[k][j] for k in keys}
            try:
                if self.encoded:
                    row = _decode(row)
                recs = self.mapper(row, index)
                bad = None
            except Reject as rej:
                recs, bad = [{**R.empty_record(self.kind), "id": _safe_id(row, self.mapper, index), "group": ""}], rej
            for rec in recs:
                rec.update(source_index=index, augmented=False, reject_stage="", reject_reason="", reject_detail="", raw="")
                if bad is not None:
                    rec.update(reject_stage="map", reject_reason=bad.reason, reject_detail=bad.detail, raw=R.to_json_row(row))
                rec["prompt_key"] = R.prompt_key(rec) if bad is None else ""
                for k in self.names:
                    out[k].append(rec.get(k))
        return out


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    from rmspec.data.hand_read import BAD_LINE, decode_row

    try:
        return decode_row(row)
    except ValueError as exc:
        raise Reject("invalid_json", str(exc)) from None
    finally:
        row.pop(BAD_LINE, None)


def _safe_id(row: dict[str, Any], mapper: RowMapper, index: int) -> str:
    try:
        return mapper._id(row, index)
    except Exception:
        return f"row-{index}"


def pair_by_prompt(ds: Any, attribute: str) -> Any:
    """helpsteer2 + pair_by: the best and worst scored responses of each prompt become a pair."""
    import datasets

    rows = ds.to_list()
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if not r["reject_reason"]:
            groups.setdefault(r["prompt_key"], []).append(i)
    out = []
    done: set[int] = set()
    for key, members in groups.items():
        ranked = sorted(members, key=lambda i: -rows[i]["scores"][0])
        best, worst = rows[ranked[0]], rows[ranked[-1]]
        if len(members) < 2 or best["scores"][0] == worst["scores"][0]:
            reason, detail = (("no_pair_partner", "the only response to its prompt") if len(members) < 2
                              else ("tie", f"all responses to the prompt score {best['scores'][0]:g} on {attribute}"))
            for i in members:
                rows[i].update(reject_stage="map:pair_by", reject_reason=reason, reject_detail=detail)
            continue
        out.append({**{k: best[k] for k in ("source_index", "id", "group", "augmented", "prompt_key", "prompt_messages")},
                    "reject_stage": "", "reject_reason": "", "reject_detail": "", "raw": "",
                    "chosen": best["response"], "rejected": worst["response"],
                    "margin": best["scores"][0] - worst["scores"][0],
                    "score_chosen": best["scores"][0], "score_rejected": worst["scores"][0]})
        done.update((ranked[0], ranked[-1]))
        for i in ranked[1:-1]:
            rows[i].update(reject_stage="map:pair_by", reject_reason="not_paired",
                           reject_detail="between the best and the worst response of its prompt")
    for i, r in enumerate(rows):
        if i in done:
            continue
        if not r["reject_reason"]:  # cannot happen: every live row was paired or marked
            raise AssertionError("pair_by left a row unaccounted")
        out.append({**{k: r[k] for k in ("source_index", "id", "group", "augmented", "prompt_key", "prompt_messages",
                                            "reject_stage", "reject_reason", "reject_detail")},
                    "raw": r["raw"] or R.to_json_row({"prompt": r["prompt_messages"], "response": r["response"],
                                                      attribute: r["scores"][0] if r["scores"] else None}),
                    "chosen": "", "rejected": "", "margin": 0.0, "score_chosen": None, "score_rejected": None})
    return datasets.Dataset.from_list(out, features=R.features(PAIRS))


def _mark_indices(batch: dict[str, list], indices: list[int], drop: set[int], stage: str, reason: str, detail: str):
    for j, i in enumerate(indices):
        if i in drop:
            batch["reject_stage"][j], batch["reject_reason"][j], batch["reject_detail"][j] = stage, reason, detail
    return batch


def _alive(ds: Any) -> Any:
    return ds.filter(lambda rs: [not r for r in rs], input_columns=["reject_reason"], batched=True,
                     new_fingerprint=_hash(ds._fingerprint, "alive"))


def _rejected(ds: Any) -> Any:
    return ds.filter(lambda rs: [bool(r) for r in rs], input_columns=["reject_reason"], batched=True,
                     new_fingerprint=_hash(ds._fingerprint, "rejected"))


def _output(ds: Any, approach: str) -> Any:
    keep = [c for c in OUTPUT_COLUMNS[approach] if c in ds.column_names]
    return ds.select_columns(keep)


def _write_rejects(path: str | Path, parts: list[tuple[str, Any]]) -> int:
    """JSONL, one line per rejected row: source, source_index, id, stage, reason, detail, row."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    skip = {"reject_stage", "reject_reason", "reject_detail", "raw", "source_index", "prompt_key", "id"}
    with path.open("w", encoding="utf-8") as fh:
        for name, ds in parts:
            for batch in ds.iter(batch_size=1000):
                for j in range(len(batch["id"])):
                    raw = batch["raw"][j]
                    row = json.loads(raw) if raw else {k: v[j] for k, v in batch.items()
                                                       if k not in skip and not k.endswith("input_ids")
                                                       and not k.endswith("token_type_ids") and k != "labels"}
                    fh.write(json.dumps({"source": name, "source_index": batch["source_index"][j], "id": batch["id"][j],
                                         "stage": batch["reject_stage"][j], "reason": batch["reject_reason"][j],
                                         "detail": batch["reject_detail"][j], "row": row},
                                        ensure_ascii=False, default=str) + "\n")
                    n += 1
    return n


def _row_hashes(ds: Any, approach: str) -> Any:
    """One 64-bit hash per row (8 bytes a row, not a Python string)."""
    import numpy as np

    from rmspec.data.filters import row_hash

    out = np.empty(len(ds), dtype=np.uint64)
    body = {PAIRS: ["chosen", "rejected"], POINTWISE: ["response", "scores"], PROCESS: ["steps", "step_labels"]}
    cols = ["prompt_key", "id", *body.get(approach, ["messages"])]
    k = 0
    for batch in ds.select_columns(cols).iter(batch_size=2000):
        for j in range(len(batch["id"])):
            out[k] = int(row_hash(batch, j, "row", approach)[:16], 16)
            k += 1
    return out


def _groups(pool: Any, validation: Any, approach: str) -> dict[str, dict[str, Any]]:
    if "group" not in pool.column_names:
        return {}
    import numpy as np

    encoded = arrow(pool, "group").combine_chunks().dictionary_encode()
    names = [g or "(none)" for g in encoded.dictionary.to_pylist()]
    if names == ["(none)"] or not names:
        return {}
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    have_len = approach == PAIRS and "chosen_tokens" in pool.column_names
    chosen = numbers(pool, "chosen_tokens") if have_len else None
    rejected = numbers(pool, "rejected_tokens") if have_len else None
    val_counts: dict[str, int] = {}
    if validation is not None and "group" in validation.column_names:
        for g, n in zip(*np.unique(np.asarray(column(validation, "group"), dtype=object), return_counts=True)):
            val_counts[g or "(none)"] = int(n)
    out: dict[str, dict[str, Any]] = {}
    for code, g in sorted(enumerate(names), key=lambda cg: cg[1]):
        mask = codes == code
        entry: dict[str, Any] = {"rows": int(mask.sum()), "validation": val_counts.get(g, 0)}
        if have_len:
            entry["length_heuristic_accuracy"] = length_heuristic(chosen[mask], rejected[mask])
        out[g] = entry
    return out


def _count_sources(ds: Any) -> int:
    seen = column(ds, "source_index")
    return (max(seen) + 1) if seen else 0


def column(ds: Any, name: str) -> list:
    """One column as a Python list, read in one Arrow take (row-by-row access is far slower)."""
    return arrow(ds, name).to_pylist()


def arrow(ds: Any, name: str) -> Any:
    """One column as an Arrow ChunkedArray (the dataset's row selection applied)."""
    import pyarrow as pa

    indices = getattr(ds, "_indices", None)  # the row selection left by filter/select
    if hasattr(ds, "data") and (indices is None or isinstance(indices, pa.Table) or hasattr(indices, "column")):
        # One Arrow take. datasets' own path gathers one single-row slice per row, which costs
        # about a kilobyte a row and minutes on a million rows.
        col = ds.data.column(name)
        return col if indices is None else col.take(indices.column(0))
    col = ds.with_format("arrow")[name]
    return col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col], type=col.type)


def numbers(ds: Any, name: str) -> Any:
    """A numeric or boolean column as a numpy array."""
    return arrow(ds, name).to_numpy()


def _materialise(iterable: Any, features: Any, folder: Path) -> Any:
    """Write a mapped stream to one Arrow file in batches (bounded memory) and memory-map it."""
    import datasets
    from datasets.arrow_writer import ArrowWriter

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("stream-*.arrow"):  # left by earlier runs; a day is longer than any run
        if time.time() - old.stat().st_mtime > 86400:
            old.unlink(missing_ok=True)
    path = folder / f"stream-{os.getpid()}-{os.urandom(6).hex()}.arrow"
    with ArrowWriter(features=features, path=str(path)) as writer:
        for batch in iterable.iter(batch_size=1000):
            writer.write_batch(batch)
        writer.finalize()
    return datasets.Dataset.from_file(str(path))


def _procs(rows: int) -> int | None:
    if rows < PARALLEL_FROM_ROWS:
        return None
    return max(1, min(8, os.cpu_count() or 1)) or None


def _source_identity(src: Any, base_dir: Path) -> str | None:
    """What identifies the source's data for the cache: files by size and mtime, a pinned hub revision."""
    from rmspec.data.sources import resolve_paths

    if src.kind == "files":
        paths = resolve_paths(src.paths, base_dir, "data.source")
        return _hash(*[f"{p}:{os.path.getsize(p)}:{os.stat(p).st_mtime_ns}" for p in paths])
    if src.kind == "sql":
        if src.sqlite is None:
            return None
        p = Path(src.sqlite) if Path(src.sqlite).is_absolute() else base_dir / src.sqlite
        return _hash(src.model_dump_json(), f"{p.stat().st_size}:{p.stat().st_mtime_ns}") if p.exists() else None
    if src.kind == "disk":
        p = Path(src.path) if Path(src.path).is_absolute() else base_dir / src.path
        stamps = sorted(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in p.rglob("*") if f.is_file()) if p.is_dir() else []
        return _hash(src.model_dump_json(), *stamps)
    if src.kind == "huggingface":
        local = base_dir / src.path
        if local.exists():
            stamps = sorted(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in ([local] if local.is_file() else local.rglob("*")) if f.is_file())
            return _hash(src.model_dump_json(), *stamps)
        return _hash(src.model_dump_json()) if src.revision else None
    return None  # custom sources: no way to know when their data changes


def _hash(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:32]
