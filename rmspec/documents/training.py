"""The training spec (rmspec.spec.Spec): a reward model trained by one of the approaches
(rmspec.approaches). Planned by rmspec.plan, launched by rmspec.launch, evaluated by
rmspec.evaluate: the CLI's own paths, so this kind declares only how the file is read.

It claims every document no other kind claims, so a file that is unreadable, has no approach kind or
names an unknown one is reported by the training spec's loader (with the approaches it knows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.documents.base import DocumentKind
from rmspec.spec import LoadedSpec, Spec


class TrainingSpec(DocumentKind):
    name = "training"
    description = "a reward model trained by an approach (rmspec.approaches)"
    document = Spec
    trains = True
    run_file = "spec.yaml"

    def claims(self, doc: dict[str, Any]) -> bool:
        return True

    def load(self, path: str | Path, sets: Any = ()) -> LoadedSpec:
        from rmspec.spec import load_spec

        return load_spec(path, sets)

    def check(self, doc: dict[str, Any], locations: Any, file: str | Path) -> Any:
        from rmspec.spec import validate_document

        return validate_document(doc, locations)

    def summary(self, loaded: LoadedSpec) -> str:
        s = loaded.spec
        if s.data.sources:
            data = ", ".join(
                f"{e.name}: {e.source.kind}" + (f" x {e.weight:g}" if e.weight is not None else "")
                for e in s.data.sources
            )
        else:
            assert s.data.source is not None  # DataSpec._one_form: no sources means one source
            data = s.data.source.kind
        return f"{s.approach.kind}, model {s.model.name_or_path}, data {data}"


KIND = TrainingSpec()
