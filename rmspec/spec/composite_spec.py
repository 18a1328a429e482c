"""A composite reward's spec file: `approach: {kind: composite}` with the rows it fits and is
evaluated on, its benchmarks and its run directory. It trains nothing, so it has no `model:`,
`training:` or `hardware:` section; `rmspec validate`, `plan`, `run` and `init` find it among the
document kinds (rmspec/documents/composite.py), whose declaration loads it here (located errors, as
any spec).
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt, ValidationError, model_validator

from rmspec.errors import SpecError, SpecIssue
from rmspec.spec.base import Section
from rmspec.spec.composite import COMPONENT_SETTINGS, ComponentBase, Composite
from rmspec.spec.evaluation import EvalSpec
from rmspec.spec.explain import explain
from rmspec.spec.overrides import apply_set, parse_set, resolve_extends
from rmspec.spec.yaml_io import Locations, read_yaml_file


class CompositeData(Section):
    train: str | None = Field(
        None,
        description="Rows (JSONL, JSON, CSV, Parquet; relative to the spec) the normalisation is fitted on; "
        "needed when a component has normalize: zscore or minmax.",
    )
    validation: str | None = Field(
        None, description="Rows scored after the fit: results.json's validation section (reward, components, failures)."
    )
    limit: PositiveInt | None = Field(None, description="Read at most this many rows of each file (smoke tests).")


class CompositeOutput(Section):
    dir: str = Field(
        "runs/{name}", description="Run directory ({name} is the spec's name): reward.yaml, results.json, eval/."
    )


class CompositeSpec(Section):
    """A reward built without training: rules, judges and trained models combined."""

    version: Literal[1] = Field(description="Version of the spec format (currently 1).")
    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Run name: letters, digits, '.', '_' and '-'; names the run directory.",
    )
    extends: str | None = Field(
        None, description="Another composite spec file (relative to this one) this file overrides."
    )
    approach: Composite = Field(description="The components and how they combine.")
    data: CompositeData = Field(default_factory=CompositeData, description="Rows to fit and to validate on.")
    eval: EvalSpec = Field(
        default_factory=EvalSpec, description="Validation and benchmarks, scored by their official rules."
    )
    output: CompositeOutput = Field(default_factory=CompositeOutput, description="Where the run is written.")

    @model_validator(mode="after")
    def _fit_rows(self) -> CompositeSpec:
        normalised = [c.name for c in self.approach.components if c.normalize != "none"]
        if normalised and self.data.train is None:
            raise ValueError(
                f"components {', '.join(normalised)} normalise with statistics of the training rows: set data.train"
            )
        if (
            self.eval.validation
            and self.data.validation is None
            and self.data.train is None
            and not self.eval.benchmarks
        ):
            raise ValueError("nothing to evaluate: set data.validation, eval.benchmarks, or eval.validation: false")
        return self


@dataclass
class LoadedComposite:
    spec: CompositeSpec
    file: Path
    document: dict[str, Any]
    locations: Locations

    @property
    def base_dir(self) -> Path:
        return self.file.parent

    @property
    def spec_hash(self) -> str:
        canonical = json.dumps(self.document, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()


def load_composite_spec(path: str | Path, sets: list[str] | tuple[str, ...] = ()) -> LoadedComposite:
    file = Path(path)
    doc, locs = read_yaml_file(file)
    doc, locs = resolve_extends(doc, locs, file, read_yaml_file, (file.resolve(),))
    for expr in sets:
        key_path, value, set_locs = parse_set(expr)
        apply_set(doc, key_path, value, expr)
        locs.drop_under(key_path)
        locs.merge(set_locs)
    return check_composite_document(doc, locs, file)


def check_composite_document(doc: Any, locs: Locations, file: Path) -> LoadedComposite:
    """A parsed composite document validated (located errors) and its data files found."""
    try:
        spec = CompositeSpec.model_validate(doc)
    except ValidationError as exc:
        issues = explain(exc, doc, locs, CompositeSpec)
        raise SpecError(sorted(issues, key=lambda i: (i.file or "", i.line or 0, i.col or 0))) from None
    missing = [
        (("data", key), value)
        for key, value in (("train", spec.data.train), ("validation", spec.data.validation))
        if value is not None and not (file.parent / value).is_file()
    ]
    if missing:
        issues = []
        for where_path, value in missing:
            where = locs.find(where_path)
            issues.append(
                SpecIssue(
                    ".".join(where_path),
                    f"file not found: {value}",
                    where.file,
                    where.line,
                    where.col,
                    "give a path relative to the spec file",
                )
            )
        raise SpecError(issues)
    return LoadedComposite(spec=spec, file=file, document=doc, locations=locs)


def use_components(settings: list[type[ComponentBase]]) -> None:
    """Make `approach.components` accept exactly these settings classes, told apart by `kind` (the
    component registry, rmspec.composite.components, calls it when a kind is registered or removed):
    the union is rebuilt in Composite and in this document, which embeds it."""
    COMPONENT_SETTINGS[:] = settings
    field = Composite.model_fields["components"]
    members: Any = functools.reduce(operator.or_, settings)  # A | B | ...
    entry: Any = Annotated[members, Field(discriminator="kind")]
    field.annotation = list[entry]
    Composite.model_rebuild(force=True)
    CompositeSpec.model_rebuild(force=True)
