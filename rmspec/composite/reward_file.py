"""RUN/reward.yaml: the resolved composite a run writes and `load_scorer` reads.

It holds the composite section with every path made absolute (so the file works from any working
directory), the normalisation statistics fitted on the training split, and the versions of what
computes the rules (a math-verify upgrade can change verdicts).
"""

from __future__ import annotations

import io
from importlib import metadata
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.spec.composite import Composite

REWARD_FILE = "reward.yaml"
FORMAT = 1
VERSIONED = ("rmspec", "math-verify", "jsonschema", "transformers", "torch", "httpx")


def resolve_paths(composite: Composite, base_dir: Path) -> Composite:
    """The same composite with its relative paths (models, tokenizers, schema and rubric files)
    made absolute against `base_dir`; a name that is no local path (a hub id) is kept."""

    def local(path: str) -> str:
        p = Path(path).expanduser()
        p = p if p.is_absolute() else base_dir / p
        return str(p.resolve()) if p.exists() else path

    resolved = []
    for c in composite.components:  # each kind names its path fields (rmspec.spec.composite_component: `paths`)
        named = {name: getattr(c, name) for name in c.paths}
        local_paths = {name: local(value) for name, value in named.items() if isinstance(value, str)}
        resolved.append(c.model_copy(update=local_paths) if local_paths else c)
    return composite.model_copy(update={"components": resolved})


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def reward_document(composite: Composite, stats: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    resolved = resolve_paths(composite, base_dir)
    return {
        "format": FORMAT,
        "approach": resolved.model_dump(mode="json", by_alias=True, exclude_defaults=False),
        "normalization": {name: s for name, s in stats.items() if s is not None},
        "versions": versions(),
    }


def write_reward_file(folder: Path, composite: Composite, stats: dict[str, Any], base_dir: Path) -> Path:
    from ruamel.yaml import YAML

    from rmspec.rundir.layout import atomic_write_text

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(reward_document(composite, stats, base_dir), buffer)
    path = folder / REWARD_FILE
    atomic_write_text(path, buffer.getvalue())
    return path


def is_composite(path: str | Path) -> bool:
    p = Path(path)
    return (p.is_dir() and (p / REWARD_FILE).is_file()) or (p.is_file() and p.name == REWARD_FILE)


def read_reward_file(path: str | Path) -> tuple[Composite, dict[str, Any], Path]:
    """(composite, normalisation statistics, folder) of RUN or RUN/reward.yaml."""
    from pydantic import ValidationError

    from rmspec.spec.yaml_io import read_yaml_file

    file = Path(path) / REWARD_FILE if Path(path).is_dir() else Path(path)
    document, _ = read_yaml_file(file)
    if not isinstance(document, dict) or document.get("format") != FORMAT or "approach" not in document:
        raise RmspecError(f"{file} is not a composite reward file (format {FORMAT})", "rerun `rmspec run SPEC`")
    try:
        composite = Composite.model_validate(document["approach"])
    except ValidationError as exc:
        raise RmspecError(f"{file}: {exc.errors()[0]['msg']}", "rerun `rmspec run SPEC` to rewrite it") from None
    return composite, dict(document.get("normalization") or {}), file.parent
