"""The document kinds: which kind of document a spec file or a run directory is, asked once per
command by the CLI (rmspec.cli.options.SpecFile, RunOrSpec; `rmspec init`, `rmspec schema`).

Each kind is one module here (its declaration, `KIND`, an rmspec.documents.base.DocumentKind) and one
line in MODULES below: the training spec (rmspec.spec.Spec, trained by an approach) and the composite
spec (trains nothing). A parsed document is of the first kind in MODULES that claims it; the training
spec comes last and claims the rest, so a file nobody else claims is read (and its mistakes reported)
by the training spec's loader.

Light (no torch): `rmspec validate`, `plan`, `init` and `schema` import this package.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from rmspec.documents.base import DocumentKind
from rmspec.spec.choices import unknown_choice

# One line per document kind, the training spec last (it claims what no other kind claims).
MODULES = ("composite", "training")

_registry: dict[str, DocumentKind] = {}
for _module in MODULES:
    _kind = importlib.import_module(f"rmspec.documents.{_module}").KIND
    _registry[_kind.name] = _kind

TRAINING = _registry["training"]


def names() -> tuple[str, ...]:
    return tuple(_registry)


def get(name: str) -> DocumentKind:
    try:
        return _registry[name]
    except KeyError:
        raise ValueError(unknown_choice("document kind", name, tuple(_registry))) from None


def own_kinds() -> tuple[DocumentKind, ...]:
    """The kinds that train nothing: each is a document of its own, offered by `init --approach NAME`."""
    return tuple(k for k in _registry.values() if not k.trains)


def of_document(doc: Any) -> DocumentKind:
    """The kind of a parsed document (the training spec when no other kind claims it)."""
    if isinstance(doc, dict):
        for kind in _registry.values():
            if kind.claims(doc):
                return kind
    return TRAINING


def of_file(path: str | Path) -> DocumentKind:
    """The kind of the spec file PATH; the training spec for a file that cannot be read (its loader
    reports why) or that no other kind claims (a plan, PLAN.json, is read by the training side too)."""
    from rmspec.errors import SpecError
    from rmspec.spec.yaml_io import read_yaml_file

    try:
        doc, _ = read_yaml_file(Path(path))
    except (SpecError, OSError):
        return TRAINING
    return of_document(doc)


def of_run(folder: str | Path) -> DocumentKind | None:
    """The kind whose run directory FOLDER is, by the file each kind's run writes (a composite's
    RUN/reward.yaml, a trained run's RUN/spec.yaml); None: no run of any kind."""
    for kind in _registry.values():
        file = Path(folder) / kind.run_file
        if file.is_file() and of_file(file) is kind:
            return kind
    return None


def of_path(path: str | Path) -> DocumentKind | None:
    """A spec file's kind, or a run directory's (None: a folder that is no run, e.g. a model folder)."""
    return of_file(path) if Path(path).is_file() else of_run(path)
