"""docs/spec_reference.md is generated from the spec models (rmspec.spec.reference): it fails here when
it is stale, when a field of the models has no row, when a row has no description, and when the
README does not link to it."""

from __future__ import annotations

from pathlib import Path

from helpers.spec_fields import every_field
from rmspec.spec.reference import DOC, render

REPO = Path(__file__).resolve().parents[1]


def test_reference_is_current():
    assert DOC.read_text(encoding="utf-8") == render(), "stale: run python -m rmspec.spec.reference"


def test_every_field_has_a_row_with_a_description():
    from rmspec.spec import reference

    text = render()
    missing = [f for f in every_field() if f not in reference.COVERED]
    assert not missing, f"fields with no row in the spec reference: {missing}"
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    empty = [line for line in rows if line.split(" | ")[3].strip() == ""]
    assert not empty, empty


def test_readme_links_the_reference():
    assert "docs/spec_reference.md" in (REPO / "README.md").read_text(encoding="utf-8")
