"""Fuzzed specs: mutations of every shipped spec and template (types, keys, YAML syntax, bytes),
alias bombs and --set expressions. Each is valid, or refused with located issues; never a crash,
a traceback or a hang (harness.check_spec states the rules)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import SHIPPED, check_cli, check_spec, scaled
from strategies import alias_bombs, dump, mutated_bytes, mutated_documents, set_expressions

pytestmark = pytest.mark.slow


def _folder() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="rmspec-fuzz-")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_file_is_valid_through_the_harness(path: Path):
    """The seeds themselves pass: the harness's rules hold for good input."""
    with _folder() as tmp:
        folder = Path(tmp) / path.parent.name
        folder.mkdir()
        assert check_spec(path.read_bytes(), folder, plan=False) in ("valid", "refused")


@settings(max_examples=scaled(120))
@given(mutated_documents(), st.booleans())
def test_mutated_documents(case, flow):
    _, doc = case
    with _folder() as tmp:
        check_spec(dump(doc, flow), Path(tmp))


@settings(max_examples=scaled(150))
@given(mutated_bytes())
def test_mutated_bytes(data):
    with _folder() as tmp:
        check_spec(data, Path(tmp), plan=False)


@settings(max_examples=scaled(25))
@given(alias_bombs())
def test_alias_bombs(data):
    with _folder() as tmp:
        check_spec(data, Path(tmp), plan=False)


@settings(max_examples=scaled(60))
@given(st.lists(set_expressions, min_size=1, max_size=3))
def test_set_overrides(sets):
    with _folder() as tmp:
        check_spec((SHIPPED[0]).read_bytes(), Path(tmp), tuple(sets), plan=False)


@settings(max_examples=scaled(15))
@given(mutated_bytes())
def test_validate_command_on_mutated_bytes(data):
    """The whole command: exit 0 or 2, no traceback, no 'internal error'."""
    with _folder() as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_bytes(data)
        check_cli(["validate", str(spec)])
