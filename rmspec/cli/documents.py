"""Which document a spec file is: the training spec (rmspec.spec.Spec), or the document of its own that
an approach which trains nothing declares (rmspec.approaches.base.Approach.document, e.g. composite).

`rmspec validate`, `plan`, `run` and `init` ask here before the training spec's loader: the file's
`approach.kind` is looked up in the approach registry (rmspec.scaffold.document_approach), never
compared with a name. Light.
"""

from __future__ import annotations

from pathlib import Path

from rmspec.approaches.base import Approach


def own_document(spec_file: str | Path) -> Approach | None:
    """The approach whose own document SPEC_FILE is; None: the training spec (or a file the training
    spec's loader should report on: unreadable, no approach kind, an unknown kind)."""
    from rmspec.errors import SpecError
    from rmspec.scaffold import document_approach
    from rmspec.spec.yaml_io import read_yaml_file

    try:
        doc, _ = read_yaml_file(Path(spec_file))
    except (SpecError, OSError):
        return None
    return document_approach(doc) if isinstance(doc, dict) else None


def own_run(folder: str | Path) -> Approach | None:
    """The approach with a document of its own whose run directory FOLDER is (its `run_file` there names
    it: a composite's RUN/reward.yaml); None: a trained run, or no run."""
    from rmspec import approaches

    for name in approaches.names():
        declared = approaches.get(name)
        if declared.document is not None and own_document(Path(folder) / declared.run_file) is declared:
            return declared
    return None


def training_spec_only(spec_file: str | Path, command: str) -> None:
    """Refuse, with what to run instead, a spec of an approach that trains nothing for a command that
    reads training specs (its errors would be the training spec's keys, none of them the cause)."""
    from rmspec.errors import RmspecError

    declared = own_document(spec_file)
    if declared is not None:
        raise RmspecError(
            f"{spec_file}: approach {declared.name} trains nothing (a spec of its own); `rmspec {command}` "
            "reads training specs",
            f"rmspec validate|plan|run {spec_file}",
        )
