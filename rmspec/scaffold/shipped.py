"""Where the files `rmspec init` and `rmspec schema` read live, in a checkout and in an installed wheel.

rmspec/templates, rmspec/specs and rmspec/schemas are links to the repository-root folders of the
same names (their one home); the wheel carries the files themselves. Relative paths written inside
a template or a shipped spec (`../rmspec/data/demo/...`) are relative to the root folder, so they
are resolved lexically against the package's parent folder: in a checkout that is the repository,
in an installed wheel it is site-packages, and both hold rmspec/data/demo there. Following the
link instead would be wrong in the wheel, where rmspec/specs/../rmspec does not exist.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
TEMPLATES = PACKAGE / "templates"
SPECS = PACKAGE / "specs"
SCHEMA = PACKAGE / "schemas" / "rmspec.schema.json"
DEMO_DIR = PACKAGE / "data" / "demo"


def shipped_path(relative: str, folder: str) -> Path:
    """The absolute file a relative path inside a shipped templates/ or specs/ file names."""
    return Path(os.path.normpath(PACKAGE.parent / folder / relative))


def example_names() -> list[str]:
    return sorted(p.stem for p in SPECS.glob("*.yaml"))


def absolute_shipped_paths(node, folder: str):
    """The document with every relative `path`/`paths` that names a shipped file made absolute.

    Values that name no shipped file (hub dataset ids, the user's own files) stay as written.
    """

    def fix(value):
        if isinstance(value, str) and not os.path.isabs(value):
            target = shipped_path(value, folder)
            if target.exists():
                return str(target)
        return value

    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ("path", "train", "validation"):  # the last two: a composite's data rows
                out[key] = fix(value)
            elif key == "paths" and isinstance(value, list):
                out[key] = [fix(v) for v in value]
            else:
                out[key] = absolute_shipped_paths(value, folder)
        return out
    if isinstance(node, list):
        return [absolute_shipped_paths(v, folder) for v in node]
    return node
