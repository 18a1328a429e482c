"""Benchmark loaders: the hub id or a local file in the official schema -> examples to score.

Every benchmark becomes a list of `Example` (a prompt and the responses to score, in the order
the scoring rule needs); after scoring, `per_example_rows` turns the scores into the JSONL rows
saved in RUN/eval/ and `scoring_rules.score_rows` turns those rows into the official figures.

`datasets` is imported inside the loader only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rmspec.errors import DataError
from rmspec.evaluate.scoring_rules import judgebench_category
from rmspec.spec.evaluation import BENCHMARK_DEFAULTS

KINDS = tuple(BENCHMARK_DEFAULTS)

# Official split of each hub dataset.
DEFAULT_SPLITS = {
    "rewardbench": "filtered",
    "rewardbench2": "test",
    "rm_bench": "train",
    "judgebench": "gpt",
    "pairs": "train",
    "processbench": None,  # all four splits (rmspec.evaluate.processbench)
}

# Columns each official schema must have (id columns are optional: the row index stands in);
# `pairs` files are checked by the data pipeline preset that reads them.
REQUIRED_COLUMNS = {
    "rewardbench": ("prompt", "chosen", "rejected", "subset"),
    "rewardbench2": ("prompt", "chosen", "rejected", "subset"),
    "rm_bench": ("prompt", "chosen", "rejected", "domain"),
    "judgebench": ("question", "response_A", "response_B", "label", "source"),
    "pairs": ("prompt", "chosen", "rejected"),
    "processbench": ("problem", "steps", "label"),
}

# Where a plain preference file may keep the group a row belongs to.
PAIR_SUBSET_COLUMNS = ("subset", "group", "family", "source", "category")

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


@dataclass
class Example:
    id: str
    subset: str
    prompt: str | list[dict[str, str]]  # text, or chat messages before the response
    responses: list[str]  # in scoring order: see per_example_rows
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchmarkData:
    kind: str
    source: str  # the file or hub id it came from
    split: str | None
    examples: list[Example]
    notes: list[str] = field(default_factory=list)  # rows that could not be read, and why

    @property
    def name(self) -> str:
        return self.kind


def _unknown_kind(kind: str) -> DataError:
    return DataError(f"unknown benchmark {kind!r}", f"choose one of: {', '.join(KINDS)}")


def resolve_source(kind: str, path: str | None, base_dir: Path | None = None) -> tuple[str, bool]:
    """(path or hub id, is_local). A relative path resolves against base_dir (the spec's folder)."""
    if kind not in BENCHMARK_DEFAULTS:
        raise _unknown_kind(kind)
    if path is None:
        default = BENCHMARK_DEFAULTS[kind]
        if default is None:
            raise DataError(
                f"benchmark {kind!r} needs a file",
                "give its path (eval.benchmarks[].path in the spec, or --path FILE), a JSONL/JSON/Parquet file with prompt, chosen, rejected",
            )
        return default, False
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and base_dir is not None and (base_dir / candidate).exists():
        candidate = base_dir / candidate
    if candidate.exists():
        return str(candidate.resolve()), True
    looks_local = candidate.suffix in LOCAL_FORMATS or path.startswith((".", "/", "~")) or path.count("/") != 1
    if looks_local:
        where = f" (looked in {base_dir})" if base_dir is not None and not Path(path).is_absolute() else ""
        raise DataError(f"benchmark {kind!r}: file not found: {path}{where}", "check the path; relative paths resolve against the spec file's folder")
    return path, False


def _load_rows(kind: str, source: str, local: bool, split: str | None) -> tuple[list[dict[str, Any]], str | None]:
    import datasets

    try:
        if local and Path(source).is_file():
            builder = LOCAL_FORMATS.get(Path(source).suffix.lower())
            if builder is None:
                raise DataError(
                    f"benchmark {kind!r}: cannot read {source}: unknown format {Path(source).suffix!r}",
                    f"use one of {', '.join(sorted(LOCAL_FORMATS))}",
                )
            if builder in ("json", "csv"):  # pyarrow lets bad bytes through, to fail later as a traceback
                from rmspec.data.sources import bare_null_line, first_undecodable

                bad = first_undecodable(source, "utf-8")
                if bad is not None:
                    line, col, detail = bad
                    raise DataError(f"benchmark {kind!r}: {source}:{line}:{col}: not UTF-8 text: {detail}",
                                    "convert the file to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)")
                null = bare_null_line(source) if builder == "json" else None
                if null is not None:  # pyarrow's JSON reader segfaults on it (see bare_null_line)
                    raise DataError(f"benchmark {kind!r}: {source}:{null}: a bare null where a row (a JSON object) belongs",
                                    "remove the null lines")
            dataset = datasets.load_dataset(builder, data_files=source, split="train")
            used_split = None
        else:
            used_split = split or DEFAULT_SPLITS[kind]
            dataset = datasets.load_dataset(source, split=used_split)
    except DataError:
        raise
    except Exception as exc:  # the hub offline, a missing split, a malformed file
        raise DataError(
            f"benchmark {kind!r}: cannot load {source}" + (f" (split {split or DEFAULT_SPLITS[kind]})" if not local else "") + f": {exc}",
            "offline, point --path (or the spec's path) at a local JSON/JSONL/Parquet file in the benchmark's official schema",
        ) from None
    # `pairs` files are checked by the data pipeline's preset (any layout it reads).
    missing = [c for c in REQUIRED_COLUMNS[kind] if c not in dataset.column_names] if kind != "pairs" else []
    if missing:
        raise DataError(
            f"benchmark {kind!r}: {source} lacks column(s) {', '.join(missing)} (has: {', '.join(dataset.column_names)})",
            f"the {kind} schema needs {', '.join(REQUIRED_COLUMNS[kind])}",
        )
    return dataset.to_list(), used_split


def _as_text_list(value: Any, what: str, where: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise DataError(f"{where}: {what} must be a list of responses, got {type(value).__name__}", "use the benchmark's official schema")
    return [str(v) for v in value]


def _pair_examples(rows: list[dict[str, Any]], source: str, preset: str | None) -> tuple[list[Example], list[str]]:
    """Any preference file, mapped by the data pipeline's presets (rmspec.data.presets.RowMapper).

    No preset: `pairs` when chosen is text, `conversational` when it is a message list. The
    subset is the first of subset/group/family/source/category the file has.
    """
    from rmspec.data.presets import RowMapper
    from rmspec.data.records import Reject
    from rmspec.spec.approach import BradleyTerry
    from rmspec.spec.data import MappingSpec

    columns = list(rows[0])
    if preset is None:
        preset = "conversational" if isinstance(rows[0].get("chosen"), list) else "pairs"
    group = next((c for c in PAIR_SUBSET_COLUMNS if c in columns), None)
    mapping = MappingSpec.model_validate({"preset": preset, "columns": {"group": group} if group else {}})
    mapper = RowMapper(mapping, BradleyTerry(kind="bradley_terry"), columns, where=f"benchmark 'pairs' ({source}), preset {preset}")
    examples, rejected = [], defaultdict(int)
    for index, row in enumerate(rows):
        try:
            records = mapper(row, index)
        except Reject as exc:
            rejected[exc.reason] += 1
            continue
        for rec in records:
            prompt = rec["prompt_messages"] or ""
            examples.append(Example(str(rec["id"]), str(rec.get("group") or "all"), prompt, [rec["chosen"], rec["rejected"]]))
    notes = [f"{n} row(s) skipped: {reason}" for reason, n in sorted(rejected.items())]
    return examples, notes


def _examples(kind: str, rows: list[dict[str, Any]], source: str) -> list[Example]:
    out = []
    for index, row in enumerate(rows):
        where = f"{source} row {index}"
        if kind == "rewardbench":
            out.append(Example(str(row.get("id", index)), str(row["subset"]), row["prompt"], [str(row["chosen"]), str(row["rejected"])]))
        elif kind == "rewardbench2":
            chosen = _as_text_list(row["chosen"], "chosen", where)
            rejected = _as_text_list(row["rejected"], "rejected", where)
            num_correct = int(row.get("num_correct") or len(chosen))
            out.append(Example(str(row.get("id", index)), str(row["subset"]), row["prompt"], chosen + rejected, {"num_correct": num_correct}))
        elif kind == "rm_bench":
            chosen = _as_text_list(row["chosen"], "chosen", where)
            rejected = _as_text_list(row["rejected"], "rejected", where)
            if len(chosen) != 3 or len(rejected) != 3:
                raise DataError(f"{where}: RM-Bench needs 3 chosen and 3 rejected responses, got {len(chosen)} and {len(rejected)}", "use the official RM-Bench files")
            out.append(Example(str(row.get("id", index)), str(row["domain"]), row["prompt"], chosen + rejected))
        elif kind == "judgebench":
            label = str(row["label"])
            if label not in ("A>B", "B>A"):
                raise DataError(f"{where}: label must be 'A>B' or 'B>A', got {label!r}", "use the official JudgeBench files")
            source_name = str(row["source"])
            out.append(Example(
                str(row.get("pair_id", row.get("id", index))), judgebench_category(source_name), row["question"],
                [str(row["response_A"]), str(row["response_B"])], {"label": label, "source": source_name},
            ))
        else:
            raise _unknown_kind(kind)
    return out


def load_benchmark(
    kind: str,
    path: str | None = None,
    *,
    split: str | None = None,
    preset: str | None = None,
    limit: int | None = None,
    base_dir: Path | None = None,
) -> BenchmarkData:
    """Load a benchmark from its hub id (default) or a local JSON/JSONL/Parquet file in its official schema."""
    if kind == "processbench":  # steps, not responses: its own loader
        from rmspec.evaluate.processbench import load_processbench

        return load_processbench(path, split=split, limit=limit, base_dir=base_dir)
    if kind != "pairs" and preset is not None:
        raise DataError(f"benchmark {kind!r}: preset applies to kind 'pairs' only", "remove preset")
    if kind == "pairs" and preset in ("helpsteer2", "messages"):
        raise DataError(f"benchmark 'pairs': preset {preset!r} does not give preference pairs",
                        "use a pairwise preset: pairs, hh-rlhf, conversational, ultrafeedback-binarized, shp, ultrafeedback")
    source, local = resolve_source(kind, path, base_dir)
    rows, used_split = _load_rows(kind, source, local, split)
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise DataError(f"benchmark {kind!r}: {source} has no rows", "check the file or the split")
    if kind == "pairs":
        examples, notes = _pair_examples(rows, source, preset)
        if not examples:
            raise DataError(f"benchmark 'pairs': no row of {source} maps to a pair ({'; '.join(notes)})", "check the preset and the columns")
        return BenchmarkData(kind, source, used_split, examples, notes)
    return BenchmarkData(kind, source, used_split, _examples(kind, rows, source))


def per_example_rows(data: BenchmarkData, scores: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """The JSONL rows saved per example: id, subset and the scores in the benchmark's layout.

    pairs / rewardbench: score_chosen, score_rejected; rewardbench2: scores (correct first) and
    num_correct; rm_bench: score_chosen[3], score_rejected[3]; judgebench: score_A, score_B, label,
    source, and score_chosen/score_rejected by the label. Response lengths (characters) ride along
    for the length-bias diagnostics.
    """
    if len(scores) != len(data.examples):
        raise ValueError(f"{len(scores)} score lists for {len(data.examples)} examples")
    rows = []
    for example, s in zip(data.examples, scores):
        s = [float(v) for v in s]
        lengths = [len(r) for r in example.responses]
        row: dict[str, Any] = {"id": example.id, "subset": example.subset}
        if data.kind in ("pairs", "rewardbench"):
            row.update(score_chosen=s[0], score_rejected=s[1], len_chosen=lengths[0], len_rejected=lengths[1])
        elif data.kind == "rewardbench2":
            row.update(scores=s, num_correct=example.meta["num_correct"], lengths=lengths)
        elif data.kind == "rm_bench":
            row.update(score_chosen=s[:3], score_rejected=s[3:], lengths=lengths)
        elif data.kind == "judgebench":
            a_wins = example.meta["label"] == "A>B"
            row.update(
                source=example.meta["source"], label=example.meta["label"], score_A=s[0], score_B=s[1],
                score_chosen=s[0] if a_wins else s[1], score_rejected=s[1] if a_wins else s[0],
                len_chosen=lengths[0] if a_wins else lengths[1], len_rejected=lengths[1] if a_wins else lengths[0],
            )
        rows.append(row)
    return rows
