"""The one way a test skips for something CI installs (a package, the MiniLM checkpoint, a real server):
it skips, saying what to install, on a developer's machine, and fails under CI=true, where a skip would
turn a missing dependency into a green run (.ci/run installs every one of them)."""

from __future__ import annotations

import importlib
import os
from typing import Any, NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(reason: str) -> NoReturn:
    """Skip (at module level too) with the reason; under CI=true fail with it instead."""
    if in_ci():
        pytest.fail(f"CI=true, and CI installs this: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def need(module: str, install: str = "pip install -e '.[dev]'") -> Any:
    """The imported module, or missing() naming the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing(f"{module} is not installed ({install}): {exc}")
