"""Field-walker entries for the approach, training, evaluation, output and tracking fields that the core
table (tests/test_every_field_is_read.py) does not reach. Proven by
tests/test_every_field_is_read_recipes.py; the coverage check in the core test reads this table too."""

from __future__ import annotations

# "Class.field" -> (override, artifact); the format of each entry is the one the proving test documents
EFFECTS: dict[str, tuple[str, str]] = {}
