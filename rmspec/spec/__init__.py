"""Load, merge and validate a spec: all problems at once, each located in its file."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rmspec.errors import SpecError, SpecIssue
from rmspec.spec.explain import explain
from rmspec.spec.overrides import apply_set, parse_set, resolve_extends
from rmspec.spec.root import SPEC_VERSION, Spec
from rmspec.spec.rules import check
from rmspec.spec.yaml_io import Locations, read_yaml_file

__all__ = ["LoadedSpec", "Spec", "SPEC_VERSION", "load_spec", "validate_document"]


@dataclass
class LoadedSpec:
    spec: Spec
    file: Path  # the spec file the user named
    document: dict  # the merged document (extends and --set applied), as validated
    locations: Locations

    @property
    def base_dir(self) -> Path:
        """Relative paths in the spec (data files, SQLite) resolve against this."""
        return self.file.parent

    @property
    def spec_hash(self) -> str:
        """Hash of the merged document: a plan refuses to run once this changes."""
        canonical = json.dumps(self.document, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()


def validate_document(doc: Any, locs: Locations) -> Spec:
    """Structural validation, then the cross-field rules; raises one SpecError with every issue."""
    if not isinstance(doc, dict):
        where = locs.find(())
        raise SpecError(
            [
                SpecIssue(
                    "",
                    f"a spec must be a YAML map of sections, got {type(doc).__name__}",
                    where.file,
                    1,
                    1,
                    "start from `rmspec init`",
                )
            ]
        )
    try:
        spec = Spec.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(_in_file_order(explain(exc, doc, locs, Spec))) from None
    issues = []
    for path, message, hint in check(spec):
        where = locs.find(path)
        issues.append(SpecIssue(".".join(map(str, path)), message, where.file, where.line, where.col, hint))
    if issues:
        raise SpecError(_in_file_order(issues))
    return spec


def _in_file_order(issues: list[SpecIssue]) -> list[SpecIssue]:
    return sorted(issues, key=lambda i: (i.file or "", i.line or 0, i.col or 0))


def load_spec(path: str | Path, sets: list[str] | tuple[str, ...] = ()) -> LoadedSpec:
    file = Path(path)
    doc, locs = read_yaml_file(file)
    if isinstance(doc, dict):
        doc, locs = resolve_extends(doc, locs, file, read_yaml_file, (file.resolve(),))
        for expr in sets:
            key_path, value, set_locs = parse_set(expr)
            apply_set(doc, key_path, value, expr)
            locs.drop_under(key_path)
            locs.merge(set_locs)
    spec = validate_document(doc, locs)
    return LoadedSpec(spec=spec, file=file, document=doc, locations=locs)
