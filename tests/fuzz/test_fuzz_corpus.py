"""Every input that once broke a rule (tests/fuzz/corpus/), replayed as a regular test.

specs/NAME.yaml goes through harness.check_spec and `rmspec validate`; data/NAME.PRESET.jsonl
through harness.check_data with that preset. NAME.*.txt beside a case says what it broke and
how that was fixed. New cases land here from a fuzz run with RMSPEC_FUZZ_SAVE=1."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from harness import (
    CORPUS,
    SPEC_FOR_DATA,
    check_cli,
    check_data,
    check_spec,
    private_datasets_cache,  # noqa: F401 (autouse fixture)
)

SPECS = sorted((CORPUS / "specs").glob("*.yaml"))
DATA = sorted((CORPUS / "data").glob("*.jsonl"))


def test_the_corpus_is_there():
    assert SPECS and DATA
    for case in [*SPECS, *DATA]:  # each says what it found
        assert case.with_suffix(case.suffix + ".txt").is_file(), case


@pytest.mark.parametrize("case", SPECS, ids=lambda p: p.name)
def test_spec_case(case: Path):
    note = case.with_suffix(".yaml.txt").read_text() if case.with_suffix(".yaml.txt").exists() else ""
    sets = tuple(json.loads(note.split("sets: ", 1)[1].splitlines()[0])) if note.startswith("sets: ") else ()
    with tempfile.TemporaryDirectory(prefix="rmspec-corpus-") as tmp:
        check_spec(case.read_bytes(), Path(tmp), sets)
        spec = Path(tmp) / "spec.yaml"
        check_cli(["validate", str(spec), *[a for s in sets for a in ("--set", s)]])


@pytest.mark.parametrize("case", DATA, ids=lambda p: p.name)
def test_data_case(case: Path):
    preset = case.name.split(".")[-2]
    assert preset in SPEC_FOR_DATA, case.name
    with tempfile.TemporaryDirectory(prefix="rmspec-corpus-") as tmp:
        check_data(case.read_bytes(), Path(tmp), preset)
