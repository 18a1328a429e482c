"""The annotation task kinds (rmspec/annotate/kinds): one home for what differs between pairwise,
pointwise and process labelling; the rest of rmspec.annotate asks a kind instead of comparing names."""

from __future__ import annotations

import re
from pathlib import Path

from rmspec import approaches
from rmspec.annotate import kinds
from rmspec.annotate.source import exportable_approaches

ANNOTATE = Path(__file__).resolve().parents[1] / "rmspec" / "annotate"


def test_every_kind_a_source_can_make_has_an_entry():
    # A spec's rows make the kind its approach's rows map to; a file of rows makes pairs.
    made = {kinds.BY_ROWS[approaches.get(name).rows].name for name in exportable_approaches()}
    assert made | {kinds.PAIRWISE} <= set(kinds.KINDS)
    assert set(kinds.KINDS) == {"pairwise", "pointwise", "process"}  # the names task data and exports carry
    assert {k.name for k in kinds.BY_ROWS.values()} == set(kinds.KINDS)  # every kind is made from some rows


def test_lookup_is_by_the_exported_name_only():
    assert kinds.get("pairwise") is kinds.of("pairwise")
    for junk in (None, "", "Pairwise", ["pairwise"], {"k": 1}, 3):  # what an export may hold in rmspec_kind
        assert kinds.get(junk) is None


def test_what_each_kind_says():
    pairwise, pointwise, process = (kinds.of(n) for n in ("pairwise", "pointwise", "process"))
    assert [k.reads for k in (pairwise, pointwise, process)] == [True, True, False]  # process: recognised, not read
    assert [k.swaps for k in (pairwise, pointwise, process)] == [True, False, False]
    assert [k.preferences for k in (pairwise, pointwise, process)] == [True, False, False]
    assert pairwise.agreement_refusal is None and process.agreement_refusal is None
    assert pointwise.agreement_refusal


def test_no_module_outside_the_kinds_compares_kind_names():
    ladder = re.compile(r"(?:==|!=)\s*(?:PAIRWISE|POINTWISE|PROCESS)\b|\bin \((?:PAIRWISE|POINTWISE|PROCESS)")
    kind_value = re.compile(
        r"(?:==|!=)\s*\"(?:pairwise|pointwise|process)\"|\"(?:pairwise|pointwise|process)\"\s*(?:==|!=)"
    )
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(ANNOTATE.glob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ladder.search(line) or kind_value.search(line)
    ]
    assert found == [], "ask the kind (rmspec.annotate.kinds) instead:\n" + "\n".join(found)
