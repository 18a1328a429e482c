"""The extras check of a command given a document of an approach that trains nothing (a composite's
spec, its run directory or RUN/reward.yaml): `rmspec run`, `score`, `serve` and `export` call it
before any work, so a missing optional package stops them with exit 2 naming the extra
(`rmspec[rules]` for math-verify), never as per-row failures. Light: YAML, pydantic, importlib."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def require_for_own_spec(spec: Any) -> None:
    """A loaded document of its own (a composite spec): its parts' packages and its benchmarks'."""
    from rmspec.extras import require_for_section

    evaluation = getattr(spec, "eval", None)
    require_for_section(spec.approach, [b.kind for b in evaluation.benchmarks] if evaluation is not None else [])


def require_for_target(target: str | Path) -> None:
    """TARGET a composite spec, run directory or run file: its components' packages. Anything else (a
    trained run, a model folder) and a document its command's loader will refuse pass through."""
    from pydantic import TypeAdapter, ValidationError

    from rmspec import documents
    from rmspec.extras import require_for_section
    from rmspec.spec.yaml_io import read_yaml_file

    path = Path(target)
    kind = documents.of_path(path) if path.exists() else None
    if kind is None or kind.trains:
        return
    document: Any = read_yaml_file(path / kind.run_file if path.is_dir() else path)[0]
    section = document.get("approach") if isinstance(document, dict) else None
    section_type: Any = kind.document.model_fields["approach"].annotation  # e.g. rmspec.spec.composite.Composite
    try:  # the approach section alone: a run file holds it without the spec's other sections
        typed = TypeAdapter(section_type).validate_python(section)
    except ValidationError:  # the command's own loader reports it, located
        return
    require_for_section(typed)
