"""Field-walker entries for the data side that the core table (tests/test_every_field_is_read.py) does not
reach: non-file sources, mappings and columns, mixture entries, filters. Proven by
tests/test_every_field_is_read_sources.py; the coverage check in the core test reads this table too.

"Class.field" -> (override, scenario). The scenario names a small spec and its data, written by that test
(SCENARIOS there); the override is --set expressions on it, "a;b;c": all but the last are set on both
sides, the last only on the changed side. The artifact compared is what the data stage gives the user
(the report, the train/validation rows, the rejects, or the error it stops with) together with the calls
rmspec makes to the libraries that read the source (datasets.load_dataset / load_from_disk,
sqlalchemy.create_engine), recorded on their way through. A `kind` entry puts a source (or filter,
augmentation) of that kind in place of another reading the same rows, or adds it to none."""

from __future__ import annotations

ENC = "data.source.paths=[latin1.jsonl]"
GAP = "data.filters=[{kind: min_score_gap, gap: 1.5}]"
PFS = "data.augment=[{kind: pairs_from_scores}]"
TINY = "data.source={kind: fwtiny, options: {n: 3}}"
CFG = "data.source.path=hubcfg;data.source.name=first"
PG = "data.source={kind: sql, url: 'postgresql://reader@db.example/prefs', query: 'SELECT * FROM pairs'}"


def mix(wa: str, wb: str) -> str:
    """Both mixture entries (a: hub/a, b: hub/b) with the given weights."""
    entry = (
        "{{name: {n}, source: {{kind: files, paths: [hub/{n}/train.jsonl]}}, mapping: {{preset: pairs}}, weight: {w}}}"
    )
    return f"data.sources=[{entry.format(n='a', w=wa)}, {entry.format(n='b', w=wb)}]"


EFFECTS: dict[str, tuple[str, str]] = {
    "Spec.data": ("data={source: {kind: files, paths: [hub/b/train.jsonl]}, mapping: {preset: pairs}}", "pairs"),
    "DataSpec.split": ("data.split={validation_fraction: 0.5}", "pairs"),
    "SplitSpec.validation_source": ("data.split.validation_source={kind: files, paths: [hub/b/train.jsonl]}", "pairs"),
    # sources: files, hub (a local dataset folder), disk, sql, a custom kind through a real entry point
    "FilesSource.kind": ("data.source={kind: files, paths: [hub/a/train.jsonl]}", "hub"),
    "FilesSource.format": ("data.source.paths=[pairs.data];data.source.format=jsonl", "pairs"),  # auto: refused
    "FilesSource.encoding": (ENC + ";data.source.encoding=latin-1", "pairs"),
    "HuggingFaceSource.kind": ("data.source={kind: huggingface, path: pairsdir}", "pairs"),
    "HuggingFaceSource.limit": ("data.source.limit=2", "hub"),
    "HuggingFaceSource.path": ("data.source.path=hub/b", "hub"),
    "HuggingFaceSource.name": (CFG + ";data.source.name=second", "hub"),  # configs in hubcfg/README.md
    "HuggingFaceSource.data_dir": ("data.source.path=hub;data.source.data_dir=b", "hub"),
    "HuggingFaceSource.split": ("data.source.split=test", "hub"),
    "HuggingFaceSource.revision": ("data.source.revision=v2", "hub"),  # passed on; a local folder has none
    "HuggingFaceSource.streaming": ("data.source.streaming=true", "hub"),
    "HuggingFaceSource.token_env": ("data.source.token_env=FW_HUB_TOKEN", "hub"),
    "DiskSource.kind": ("data.source={kind: disk, path: pairs_saved}", "pairs"),
    "DiskSource.limit": ("data.source.limit=2", "disk"),
    "DiskSource.path": ("data.source.path=saved_b", "disk"),
    "DiskSource.split": ("data.source.split=test", "disk"),
    "SqlSource.kind": ("data.source={kind: sql, sqlite: pairs.db, query: 'SELECT * FROM pairs'}", "pairs"),
    "SqlSource.limit": ("data.source.limit=2", "sql"),
    "SqlSource.sqlite": ("data.source.sqlite=b.db", "sql"),
    "SqlSource.query": ("data.source.query=SELECT prompt, rejected AS chosen, chosen AS rejected FROM pairs", "sql"),
    # a server URL: the recorded create_engine call gets it, a stand-in SQLite file per database serves it
    "SqlSource.url": (PG + ";data.source.url='postgresql://reader@db.example/other'", "pairs"),
    "SqlSource.password_env": (PG + ";data.source.password_env=FW_DB_PASSWORD", "pairs"),
    "CustomSource.kind": (TINY, "pairs"),
    "CustomSource.options": (TINY + ";data.source.options={n: 5}", "pairs"),
    "CustomSource.limit": (TINY + ";data.source.limit=2", "pairs"),
    # mixtures (data.sources)
    "DataSpec.sources": (
        "data.sources=[{name: a, source: {kind: files, paths: [hub/a/train.jsonl]}, mapping: {preset: pairs}}]",
        "mix",
    ),
    "MixtureSource.name": ("data.sources.0.name=first", "mix"),
    "MixtureSource.source": ("data.sources.0.source={kind: files, paths: [pairs.jsonl]}", "mix"),
    "MixtureSource.mapping": ("data.sources.0.mapping={preset: pairs, columns: {chosen: rejected}}", "mix"),
    "MixtureSource.filters": ("data.sources.0.filters=[{kind: sample, n: 2}]", "mix"),
    "MixtureSource.rows": ("data.sources.0.rows=2", "mix"),
    "MixtureSource.weight": (mix("0.5", "0.5") + ";" + mix("0.2", "0.8"), "mix"),
    "DataSpec.stopping_strategy": (mix("0.2", "0.8") + ";data.stopping_strategy=all_exhausted", "mix"),
    # mappings and columns
    "MappingSpec.preset": ("data.source.paths=[hh.jsonl];data.mapping.preset=hh-rlhf", "pairs"),
    "MappingSpec.binarize": ("data.mapping.binarize=all_pairs", "ultrafeedback"),
    "MappingSpec.pair_by": ("data.mapping.pair_by=correctness", "helpsteer2"),
    "MappingSpec.chat_template": ("data.mapping.chat_template=plain", "chat"),
    "ModelSpec.chat_template": (
        "model.chat_template='{% for m in messages %}[{{ m.role }}] {{ m.content }} {% endfor %}'",
        "pairs",
    ),
    "ColumnMap.prompt": ("data.mapping.columns.prompt=alt_prompt", "pairs"),
    "ColumnMap.chosen": ("data.mapping.columns.chosen=alt_chosen", "pairs"),
    "ColumnMap.rejected": ("data.mapping.columns.rejected=alt_rejected", "pairs"),
    "ColumnMap.margin": (
        "approach.use_margin=true;data.mapping.columns.margin=m;data.mapping.columns.margin=m2",
        "pairs",
    ),
    "ColumnMap.score_chosen": (GAP + ";data.mapping.columns.score_chosen=sc2", "pairs"),
    "ColumnMap.score_rejected": (GAP + ";data.mapping.columns.score_rejected=sr2", "pairs"),
    "ColumnMap.tie": ("data.mapping.columns.tie=is_tie", "pairs"),
    "ColumnMap.id": ("data.mapping.columns.id=uid", "pairs"),
    "ColumnMap.response": ("data.mapping.columns.response=alt_response", "pointwise"),
    "ColumnMap.scores": ("data.mapping.columns.scores={helpfulness: h2}", "pointwise"),
    "ColumnMap.messages": ("data.mapping.columns.messages=alt_messages", "generative"),
    "ColumnMap.responses": ("data.mapping.columns.responses=alt_responses", "listwise"),
    "ColumnMap.response_scores": ("data.mapping.columns.response_scores=alt_scores", "listwise"),
    "ColumnMap.steps": ("data.mapping.columns.steps=alt_completions", "process"),
    "ColumnMap.step_labels": ("data.mapping.columns.step_labels=alt_labels", "process"),
    # filters and augmentation
    "DropIdenticalFilter.kind": ("data.filters=[{kind: drop_identical}]", "pairs"),
    "DropEmptyFilter.kind": ("data.filters=[{kind: drop_empty}]", "pairs"),
    "DedupFilter.on": ("data.filters=[{kind: dedup}];data.filters=[{kind: dedup, on: prompt}]", "pairs"),
    "MinScoreGapFilter.kind": (GAP, "pairs"),
    "MinScoreGapFilter.gap": (GAP + ";data.filters=[{kind: min_score_gap, gap: 3}]", "pairs"),
    "PairsFromScores.kind": (PFS, "pairs"),
    "PairsFromScores.min_gap": (PFS + ";data.augment=[{kind: pairs_from_scores, min_gap: 3}]", "pairs"),
}
