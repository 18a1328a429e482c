"""Moved to rmspec.inference.scorers.shapes (the rows a scorer reads); kept so `rmspec.score.shapes` still imports."""

from rmspec.inference.scorers.shapes import *  # noqa: F403
from rmspec.inference.scorers.shapes import (  # noqa: F401  (private helpers callers used)
    _prompt,
    _same,
)
