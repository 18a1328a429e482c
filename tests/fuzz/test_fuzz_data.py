"""Fuzzed data files: rows with random bytes, legacy encodings, wrong types, missing, extra and huge
fields, cut-off lines, deep nesting. Each file is read with its counts reconciled and every dropped
row in the rejects file with its reason (and file:line when the line itself is unreadable), or
refused with a DataError that names the file (harness.check_data states the rules)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import (
    check_data,
    private_datasets_cache,  # noqa: F401 (autouse fixture)
    scaled,
)
from strategies import data_files

pytestmark = pytest.mark.slow


@settings(max_examples=scaled(40))
@given(data_files("pairs"))
def test_pairs_rows(data):
    with tempfile.TemporaryDirectory(prefix="rmspec-fuzz-") as tmp:
        check_data(data, Path(tmp), "pairs")


@settings(max_examples=scaled(15))
@given(st.sampled_from(["conversational", "helpsteer2"]).flatmap(lambda p: st.tuples(st.just(p), data_files(p))))
def test_other_presets(case):
    preset, data = case
    with tempfile.TemporaryDirectory(prefix="rmspec-fuzz-") as tmp:
        check_data(data, Path(tmp), preset)


@settings(max_examples=scaled(12))
@given(data_files("pairs"))
def test_pairs_prepared_for_training(data):
    """Through the whole preparation (tokenizer, max_length filter, split, rejects file)."""
    from helpers.data import bert_tokenizer

    with tempfile.TemporaryDirectory(prefix="rmspec-fuzz-") as tmp:
        check_data(data, Path(tmp), "pairs", tokenizer=bert_tokenizer())
