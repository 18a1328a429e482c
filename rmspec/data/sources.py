"""Where the rows come from: one `datasets` object per `data.source` (or `split.validation_source`).

One module per kind: files (rmspec.data.files, through the row reader rmspec.rows), sql
(rmspec.data.sql); disk, hub and custom (entry point) sources are here. Every source gives back
a `datasets.Dataset` (memory-mapped Arrow on disk) or, for a streaming hub source, a
`datasets.IterableDataset`; `limit` is applied here. Problems a user can fix (a
missing file, a bad query, a gated dataset without a token) are `DataError`s that say where and
how.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rmspec.data.files import files_source, resolve_paths
from rmspec.data.files import short as _short
from rmspec.data.sql import sql_source, sql_url
from rmspec.errors import DataError

__all__ = ["open_source", "resolve_paths", "sql_url"]


def open_source(source: Any, base_dir: Path, *, limit: int | None = None, where: str = "data.source"):
    """Rows of one spec source; `limit` (the smaller of the spec's and the caller's) caps them."""
    cap = min(x for x in (limit, getattr(source, "limit", None), float("inf")) if x is not None)
    cap = None if cap == float("inf") else int(cap)
    kind = source.kind
    if kind == "files":
        ds = files_source(source, base_dir, where)
    elif kind == "disk":
        ds = _disk(source, base_dir, where)
    elif kind == "huggingface":
        ds = _huggingface(source, base_dir, where)
    elif kind == "sql":
        ds = sql_source(source, base_dir, where)
    else:
        ds = _custom(source, base_dir, where)
    return _take(ds, cap)


def data_files(source: Any, base_dir: Path) -> list[str]:
    """The files a `files` source reads (their folder is where relative image paths resolve); [] else."""
    if getattr(source, "kind", None) != "files":
        return []
    try:
        return resolve_paths(source.paths, base_dir, "data.source")
    except DataError:
        return []


def _take(ds, cap: int | None):
    import datasets

    if cap is None:
        return ds
    if isinstance(ds, datasets.IterableDataset):
        return ds.take(cap)
    return ds.select(range(min(cap, len(ds))))


# ---------------------------------------------------------------- disk


def _disk(source, base_dir: Path, where: str):
    import datasets

    path = Path(source.path)
    path = path if path.is_absolute() else base_dir / path
    if not path.is_dir():
        raise DataError(f"{where}.path: no directory {path}", "give a folder written by datasets' save_to_disk")
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:
        raise DataError(
            f"{where}.path: {path} is not a save_to_disk folder: {_short(exc)}",
            "write it with Dataset.save_to_disk or DatasetDict.save_to_disk",
        ) from None
    if isinstance(loaded, datasets.DatasetDict):
        if source.split is None:
            raise DataError(
                f"{where}: {path} holds several splits ({', '.join(loaded)})",
                f"name one with split: (one of {', '.join(loaded)})",
            )
        if source.split not in loaded:
            raise DataError(f"{where}.split: no split {source.split!r} in {path}", f"choose one of {', '.join(loaded)}")
        return loaded[source.split]
    if source.split is not None:  # a single Dataset has no splits: reading it whole would ignore the field
        raise DataError(
            f"{where}.split: {path} holds one dataset (saved from a Dataset), not splits",
            "remove split:, or save a DatasetDict with that split",
        )
    return loaded


# ---------------------------------------------------------------- hub


def _huggingface(source, base_dir: Path, where: str):
    import datasets

    token = None
    if source.token_env:
        token = os.environ.get(source.token_env)
        if not token:
            raise DataError(
                f"{where}.token_env: the environment variable {source.token_env} is not set",
                f"export {source.token_env}=<your hub token> (a read token from huggingface.co/settings/tokens)",
            )
    path = source.path
    local = base_dir / path
    if not os.path.isabs(path) and local.exists():  # a local copy or dataset folder next to the spec
        path = str(local)
    try:
        return datasets.load_dataset(
            path,
            name=source.name,
            data_dir=source.data_dir,
            split=source.split,
            revision=source.revision,
            streaming=source.streaming,
            token=token,
        )
    except Exception as exc:
        offline = os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = (
            "the hub is not reachable (offline mode): download the data where the hub is reachable, "
            "save it with save_to_disk or as JSONL, and point the spec at it with kind: disk or kind: files"
            if offline or "offline" in str(exc).lower() or "connect" in str(exc).lower()
            else "check the dataset id, config name (name:), data_dir and split; gated datasets need token_env"
        )
        raise DataError(
            f"{where}: could not load {source.path!r} split {source.split!r}: {_short(exc)}", hint
        ) from None


# ---------------------------------------------------------------- custom


def _custom(source, base_dir: Path, where: str):
    """A source registered under the `rmspec.sources` entry point: a callable(options, base_dir) -> Dataset."""
    from importlib.metadata import entry_points

    import datasets

    matches = [ep for ep in entry_points(group="rmspec.sources") if ep.name == source.kind]
    if not matches:
        raise DataError(
            f"{where}.kind: no source {source.kind!r} is registered under the rmspec.sources entry point",
            "install the package that provides it",
        )
    try:
        factory = matches[0].load()
    except Exception as exc:
        raise DataError(
            f"{where}.kind: the source {source.kind!r} ({matches[0].value}) failed to import: {_short(exc)}",
            "reinstall the package that provides it",
        ) from None
    ds = factory(dict(source.options), base_dir)
    if isinstance(ds, datasets.DatasetDict) or not isinstance(ds, (datasets.Dataset, datasets.IterableDataset)):
        raise DataError(
            f"{where}.kind: the source {source.kind!r} returned {type(ds).__name__}, not a datasets.Dataset",
            "a custom source must return one datasets.Dataset or IterableDataset",
        )
    return ds
