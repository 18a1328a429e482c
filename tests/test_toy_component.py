"""A composite component kind from outside rmspec is one module (tests/helpers/toy_component.py) plus
one registry line: `rmspec validate` accepts its kind, `rmspec run` scores the validation rows with it,
and each row's reward equals the weighted sum computed here by hand; once removed, the kind is an
unknown choice again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rmspec.composite import components

PATTERN = r"<answer>.*</answer>"
RESPONSES = [
    "<answer>4</answer>",
    "four, I think",
    "<answer>the answer is seven</answer>",
    "a long answer with no tags at all in it",
    "<answer>x</answer> trailing words",
]
SPEC = """\
version: 1
name: toy-component
approach:
  kind: composite
  components:
    - {{name: words, kind: word_count, per_word: 0.25, weight: 2.0}}
    - {{name: tags, kind: regex, pattern: '{pattern}', weight: 0.5}}
data:
  validation: {rows}
output:
  dir: {out}
"""


@pytest.fixture
def toy_kind():
    kind = components.register("helpers.toy_component")  # the one registry line
    yield kind
    components.unregister(kind)


def _spec(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": "Add 2 and 2.", "response": r}) + "\n" for r in RESPONSES))
    spec = tmp_path / "toy.yaml"
    spec.write_text(SPEC.format(pattern=PATTERN, rows=rows, out=tmp_path / "run"))
    return spec, tmp_path / "run"


def by_hand(response: str) -> float:
    """2.0 x (0.25 per whitespace word) + 0.5 x (1 when the whole response matches the pattern)."""
    words = len([w for w in re.split(r"\s+", response) if w])
    matches = re.fullmatch(PATTERN, response, flags=re.DOTALL) is not None
    return 2.0 * 0.25 * words + 0.5 * (1.0 if matches else 0.0)


def test_toy_component_validates_runs_and_scores_as_computed_by_hand(cli, tmp_path, toy_kind):
    spec, run = _spec(tmp_path)
    result = cli("validate", spec)
    assert result.code == 0, result.err
    assert "words: word_count" in result.out
    result = cli("run", spec)
    assert result.code == 0, result.err
    validation = json.loads((run / "results.json").read_text())["validation"]
    rows = [json.loads(x) for x in Path(validation["per_example_path"]).read_text().splitlines()]
    assert [r["reward"] for r in rows] == pytest.approx([by_hand(r) for r in RESPONSES])
    assert validation["metrics"]["reward_mean"] == pytest.approx(sum(map(by_hand, RESPONSES)) / len(RESPONSES))


def test_an_unregistered_kind_is_an_unknown_choice(cli, tmp_path):
    spec, _ = _spec(tmp_path)
    result = cli("validate", spec)
    assert result.code == 2 and "word_count" in result.err and "regex" in result.err
