"""Field-walker entries for the data side that the core table (tests/test_every_field_is_read.py) does not
reach: non-file sources, mappings and columns, mixture entries, filters. Proven by
tests/test_every_field_is_read_sources.py; the coverage check in the core test reads this table too."""

from __future__ import annotations

# "Class.field" -> (override, artifact); the format of each entry is the one the proving test documents
EFFECTS: dict[str, tuple[str, str]] = {}
