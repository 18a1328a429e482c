"""A row's reference answer as rules read it."""

from __future__ import annotations

from typing import Any


def reference_text(reference: Any) -> str | None:
    """The reference as text, or None when the row has none (missing, null, empty). A number is
    its text; a one-element list (verl's ground_truth is sometimes one) its element."""
    if isinstance(reference, list) and len(reference) == 1:
        reference = reference[0]
    if reference is None or isinstance(reference, bool):
        return None
    if isinstance(reference, (int, float)):
        return repr(reference) if isinstance(reference, float) else str(reference)
    if isinstance(reference, str):
        return reference if reference.strip() else None
    return None
