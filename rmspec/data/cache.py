"""The cache of prepared data: `cache_dir/<fingerprint>/` holds train, validation, the rejects
and the report. The fingerprint covers the pipeline's code, the source data (files by size and
mtime, a pinned hub revision), the `data:` section, the approach, the max length and the
tokenizer; a source without a stable identity (a live database, an unpinned stream) is not
cached. Pictures the rows name by path are part of the rows (their identity, rmspec.data.identity,
and their visual tokens): each one's size and mtime are kept beside the cache, and a changed or
missing picture makes the cache stale."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from rmspec.data.columns import stable_hash as _hash
from rmspec.data.columns import write_rejects
from rmspec.data.report import DataReport


def _code_version() -> str:
    """Hash of this package's code: a changed pipeline never reuses results cached by an older one."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


PIPELINE_VERSION = _code_version()


def default_cache_dir() -> Path:
    root = os.environ.get("RMSPEC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rmspec")
    return Path(root) / "data"


def source_identity(src: Any, base_dir: Path) -> str | None:
    """What identifies the source's data for the cache: files by size and mtime, a pinned hub revision."""
    from rmspec.data.files import resolve_paths

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
        stamps = _stamps(p.rglob("*")) if p.is_dir() else []
        return _hash(src.model_dump_json(), *stamps)
    if src.kind == "huggingface":
        local = base_dir / src.path
        if local.exists():
            stamps = _stamps([local] if local.is_file() else local.rglob("*"))
            return _hash(src.model_dump_json(), *stamps)
        return _hash(src.model_dump_json()) if src.revision else None
    return None  # custom sources: no way to know when their data changes


def config_key(data: Any, approach: Any, max_length: int, limit: int | None) -> str:
    """The part of the fingerprint that the spec decides (and the pipeline's code)."""
    return _hash(PIPELINE_VERSION, data.model_dump_json(), approach.model_dump_json(), max_length, limit)


def tokenizer_key(tokenizer: Any, layout: Any) -> str:
    """The tokenizer's part of the fingerprint: its vocabulary and rules, chat template, special tokens, layout."""
    if tokenizer is None:
        return ""
    try:
        backend = tokenizer.backend_tokenizer.to_str()
    except Exception:  # slow tokenizers: the vocabulary stands in
        backend = json.dumps(sorted(tokenizer.get_vocab().items()))
    return _hash(
        type(tokenizer).__name__,
        backend,
        getattr(tokenizer, "chat_template", None) or "",
        json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str),
        layout.kind,
    )


def cache_key(config: str, tokenizer: str, sources: list[Any], base_dir: Path) -> str | None:
    """None when the data has no stable identity (a live database, an unpinned stream)."""
    parts = [config, tokenizer]
    for src in sources:
        if src is None:
            continue
        ident = source_identity(src, base_dir)
        if ident is None:
            return None
        parts.append(ident)
    return _hash(*parts)


def _stamps(files: Any) -> list[str]:
    """Path, size and mtime of each regular file, sorted."""
    return sorted(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files if f.is_file())


def picture_stamps(*parts: Any) -> dict[str, list[int] | None]:
    """Size and mtime of each picture file the rows of ``parts`` name by path (None: not there)."""
    stamps: dict[str, list[int] | None] = {}
    for ds in parts:
        if ds is None or "images" not in ds.column_names:
            continue
        for refs in ds["images"]:
            for ref in refs or []:
                if ref.startswith("data:") or ref in stamps:
                    continue
                try:
                    st = os.stat(ref)
                    stamps[ref] = [st.st_size, st.st_mtime_ns]
                except OSError:
                    stamps[ref] = None
    return stamps


def source_pictures(ds: Any, column: str, base_dir: str | None) -> str:
    """A stamp of the picture files a source's ``column`` names by path (size and mtime of each, relative
    paths against ``base_dir``), for the fingerprint of the rows mapped from it: datasets' own cache of the
    mapping (and of every stage after it) must not outlive a picture rewritten under the same name."""
    if column not in ds.column_names:
        return ""
    stamps = set()
    for value in ds[column]:
        for ref in value if isinstance(value, list | tuple) else [value]:
            path = ref.get("path") if isinstance(ref, dict) and not ref.get("bytes") else ref
            if not isinstance(path, str) or path.startswith(("data:", "http://", "https://")):
                continue
            path = path[len("file://") :] if path.startswith("file://") else path
            full = Path(base_dir) / path if base_dir and not Path(path).is_absolute() else Path(path)
            try:
                st = full.stat()
                stamps.add(f"{full}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                stamps.add(f"{full}:missing")
    return _hash(*sorted(stamps)) if stamps else ""


def pictures_unchanged(folder: Path) -> bool:
    """Whether every picture file a cached preparation's rows name is as it was when it was cached."""
    saved = folder / "pictures.json"
    if not saved.is_file():
        return True
    for path, stamp in json.loads(saved.read_text()).items():
        try:
            st = os.stat(path)
            now: list[int] | None = [st.st_size, st.st_mtime_ns]
        except OSError:
            now = None
        if now != stamp:
            return False
    return True


def save_cache(
    folder: Path, train: Any, validation: Any, report: DataReport, rejected_parts: list[tuple[str, Any]]
) -> None:
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    stamps = picture_stamps(train, validation)
    if stamps:
        (tmp / "pictures.json").write_text(json.dumps(stamps))
    train.save_to_disk(str(tmp / "train"))
    if validation is not None:
        validation.save_to_disk(str(tmp / "validation"))
    write_rejects(tmp / "rejects.jsonl", rejected_parts)
    (tmp / "report.json").write_text(json.dumps(report.to_json(), indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def load_cache(folder: Path, rejects_path: str | Path | None, t0: float) -> tuple[Any, Any, DataReport]:
    """(train, validation, report) of a cached preparation; its rejects copied to `rejects_path`."""
    import datasets

    report = DataReport.from_json(json.loads((folder / "report.json").read_text()))
    report.cached = True
    report.seconds = round(time.time() - t0, 2)
    train = datasets.load_from_disk(str(folder / "train"))
    validation = datasets.load_from_disk(str(folder / "validation")) if (folder / "validation").is_dir() else None
    if rejects_path:
        Path(rejects_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "rejects.jsonl", rejects_path)
    return train, validation, report
