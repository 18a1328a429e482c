"""Broken specs: each must exit 2 with a located message, a useful hint and no traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

GOOD = textwrap.dedent(
    """\
    version: 1
    name: t
    model:
      name_or_path: sentence-transformers/all-MiniLM-L6-v2
    data:
      source:
        kind: files
        paths: [pairs.jsonl]
      mapping:
        preset: pairs
      filters:
        - kind: drop_empty
    approach:
      kind: bradley_terry
    training:
      epochs: 1
      learning_rate: 1.0e-5
      global_batch_size: 16
    hardware:
      device: cpu
    """
)


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


# (id, spec text, --set args, expected "LINE:COL field.path" fragment, expected message fragment)
CASES = [
    ("unknown-top-key", edit("training:", "trainig:"), [], ":15:1 trainig", "did you mean 'training'"),
    (
        "unknown-nested-key",
        edit("  learning_rate:", "  lerning_rate:"),
        [],
        ":17:3 training.lerning_rate",
        "did you mean 'learning_rate'",
    ),
    ("wrong-type-float", edit("1.0e-5", "fast"), [], ":17:18 training.learning_rate", "valid number"),
    (
        "wrong-type-int-string",
        edit("global_batch_size: 16", 'global_batch_size: "16"'),
        [],
        ":18:22 training.global_batch_size",
        "valid integer",
    ),
    (
        "wrong-type-bool",
        edit("  name_or_path: sentence-transformers/all-MiniLM-L6-v2", "  name_or_path: x\n  trust_remote_code: 'yes'"),
        [],
        ":5:22 model.trust_remote_code",
        "valid boolean",
    ),
    (
        "misspelt-approach",
        edit("kind: bradley_terry", "kind: bradly_terry"),
        [],
        ":14:9 approach.kind",
        "did you mean 'bradley_terry'",
    ),
    (
        "misspelt-filter",
        edit("- kind: drop_empty", "- kind: drop_emtpy"),
        [],
        ":12:13 data.filters.0.kind",
        "did you mean 'drop_empty'",
    ),
    ("misspelt-source", edit("kind: files", "kind: fiels"), [], ":7:11 data.source.kind", "did you mean 'files'"),
    (
        "misspelt-preset",
        edit("preset: pairs", "preset: hh-rlfh"),
        [],
        ":10:13 data.mapping.preset",
        "did you mean 'hh-rlhf'",
    ),
    ("misspelt-device", edit("device: cpu", "device: h100"), [], ":20:11 hardware.device", "did you mean 'h100-80gb'"),
    (
        "missing-section",
        edit("approach:\n  kind: bradley_terry\n", ""),
        [],
        ":1:1 approach",
        "missing required field 'approach'",
    ),
    (
        "missing-field",
        edit("  name_or_path: sentence-transformers/all-MiniLM-L6-v2", "  dtype: auto"),
        [],
        ":3:1 model.name_or_path",
        "missing required field",
    ),
    (
        "fraction-range",
        edit("    - kind: drop_empty", "    - kind: drop_empty\n  split:\n    validation_fraction: 1.5"),
        [],
        ":14:26 data.split.validation_fraction",
        "less than 1",
    ),
    (
        "zero-batch",
        edit("global_batch_size: 16", "global_batch_size: 0"),
        [],
        ":18:22 training.global_batch_size",
        "greater than 0",
    ),
    ("bad-version", edit("version: 1", "version: 2"), [], ":1:10 version", "expected one of: 1"),
    ("bad-name", edit("name: t", "name: my run"), [], ":2:7 name", "should match pattern"),
    (
        "batch-not-divisible",
        edit("device: cpu", "device: h100-80gb\n  gpus_per_node: 8").replace("16", "20"),
        [],
        ":18:22 training.global_batch_size",
        "cannot be split evenly over 8",
    ),
    (
        "pointwise-without-scores",
        edit("kind: bradley_terry", "kind: pointwise\n  attributes: [helpfulness]"),
        [],
        ":9:3 data.mapping",
        "needs scores",
    ),
    (
        "generative-encoder",
        edit("kind: bradley_terry", "kind: generative"),
        [],
        ":4:17 model.name_or_path",
        "is an encoder",
    ),
    (
        "margin-ignored",
        edit("preset: pairs", "preset: pairs\n    columns: {margin: m}"),
        [],
        ":11:23 data.mapping.columns.margin",
        "the loss ignores it",
    ),
    (
        "margin-missing",
        edit("kind: bradley_terry", "kind: bradley_terry\n  use_margin: true"),
        [],
        ":15:15 approach.use_margin",
        "no margin column",
    ),
    (
        "sql-password",
        edit(
            "    kind: files\n    paths: [pairs.jsonl]",
            "    kind: sql\n    url: postgresql://u:hunter2@db/x\n    query: select 1",
        ),
        [],
        ":8:10 data.source.url",
        "password_env",
    ),
    (
        "sql-two-targets",
        edit(
            "    kind: files\n    paths: [pairs.jsonl]",
            "    kind: sql\n    url: sqlite:///a.db\n    sqlite: a.db\n    query: select 1",
        ),
        [],
        ":6:3 data.source",
        "exactly one of url or sqlite",
    ),
    (
        "bad-regex",
        edit("- kind: drop_empty", "- kind: regex\n      field: prompt\n      pattern: '(('"),
        [],
        ":14:16 data.filters.0.pattern",
        "invalid regular expression",
    ),
    (
        "early-stop-no-eval",
        edit("  global_batch_size: 16", "  global_batch_size: 16\n  early_stopping: {metric: eval/rm/accuracy}"),
        [],
        ":19:3 training.early_stopping",
        "training.eval_steps",
    ),
    ("push-no-repo", GOOD + "output:\n  push_to_hub: true\n", [], ":21:1 output.hub_repo_id", "no hub_repo_id"),
    (
        "custom-device-incomplete",
        edit("device: cpu", "device: custom"),
        [],
        ":19:1 hardware",
        "needs memory_gb and bf16",
    ),
    ("yaml-indent", edit("  learning_rate: 1.0e-5", " learning_rate: 1.0e-5"), [], ":17:", "YAML syntax error"),
    ("yaml-unclosed-flow", edit("paths: [pairs.jsonl]", "paths: [pairs.jsonl"), [], ":", "YAML syntax error"),
    ("yaml-duplicate-key", edit("  epochs: 1", "  epochs: 1\n  epochs: 2"), [], ":17:", "duplicate"),
    ("not-a-map", "- just\n- a list\n", [], ":1:1", "must be a YAML map"),
    ("set-no-equals", GOOD, ["training.epochs"], "--set training.epochs", "expected KEY.PATH=VALUE"),
    ("set-bad-type", GOOD, ["training.epochs=lots"], "--set training.epochs=lots training.epochs", "valid number"),
    ("set-into-scalar", GOOD, ["name.first=x"], "--set name.first=x", "not a map"),
    ("set-unknown-key", GOOD, ["training.lr=1"], "--set training.lr=1 training.lr", "unknown key 'lr'"),
    (
        "set-misspelt-choice",
        GOOD,
        ["training.lr_scheduler=cosin"],
        "--set training.lr_scheduler=cosin",
        "did you mean 'cosine'",
    ),
]


@pytest.mark.parametrize("case_id,text,sets,where,what", CASES, ids=[c[0] for c in CASES])
def test_broken_spec_is_located_and_explained(cli, tmp_path: Path, case_id, text, sets, where, what):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    args = ["validate", spec]
    for s in sets:
        args += ["--set", s]
    result = cli(*args)
    assert result.code == 2, result
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert any(where in line for line in lines), f"{where!r} not in:\n{result.err}"
    assert what in result.err, f"{what!r} not in:\n{result.err}"
    if not where.startswith("--set"):
        assert str(spec) + ":" in result.err  # FILE:LINE:COL names the file


def test_all_problems_are_reported_at_once(cli, tmp_path):
    text = edit("training:", "trainig:").replace("kind: files", "kind: fiels").replace("device: cpu", "device: gpu")
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    result = cli("validate", spec)
    assert result.code == 2
    assert "3 problems" in result.err
    for fragment in ("trainig", "data.source.kind", "hardware.device"):
        assert fragment in result.err


def test_error_view_marks_the_offending_column(cli, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(edit("1.0e-5", "fast"))
    err = cli("validate", spec).err
    lines = err.splitlines()
    i = next(n for n, line in enumerate(lines) if "learning_rate: fast" in line)
    caret = lines[i + 1]
    code_line = lines[i]
    assert caret.index("^") == code_line.index("fast")


def test_extends_merges_and_locates_errors_in_the_base(cli, tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(edit("learning_rate: 1.0e-5", "learning_rate: fast"))
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nname: child\n")
    result = cli("validate", child)
    assert result.code == 2
    assert f"{base}:17:18 training.learning_rate" in result.err
    # Overriding the bad value in the child fixes it; the child's own values win.
    child.write_text("extends: base.yaml\nname: child\ntraining:\n  learning_rate: 3.0e-5\n")
    from rmspec.spec import load_spec

    loaded = load_spec(child)
    assert loaded.spec.name == "child"
    assert loaded.spec.training.learning_rate == 3e-5
    assert loaded.spec.training.global_batch_size == 16  # kept from the base


@pytest.mark.parametrize(
    "content,message",
    [
        ("extends: nowhere.yaml\n", "base spec not found"),
        ("extends: spec.yaml\nname: x\n", "circular extends"),
    ],
)
def test_broken_extends(cli, tmp_path, content, message):
    spec = tmp_path / "spec.yaml"
    spec.write_text(content)
    result = cli("validate", spec)
    assert result.code == 2
    assert f"{spec}:1:10 extends" in result.err
    assert message in result.err


def test_missing_file(cli, tmp_path):
    result = cli("validate", tmp_path / "nope.yaml")
    assert result.code == 2
    assert "file not found" in result.err


def test_set_overrides_are_typed(tmp_path):
    from rmspec.spec import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(GOOD)
    loaded = load_spec(
        spec, ["training.epochs=3", "training.learning_rate=2e-5", "data.filters=[]", "hardware.gpus_per_node=2"]
    )
    assert loaded.spec.training.epochs == 3.0
    assert loaded.spec.training.learning_rate == 2e-5
    assert loaded.spec.data.filters == []
    assert loaded.spec.hardware.gpus_per_node == 2


def test_spec_hash_changes_with_content(tmp_path):
    from rmspec.spec import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(GOOD)
    first = load_spec(spec).spec_hash
    assert load_spec(spec).spec_hash == first
    assert load_spec(spec, ["training.epochs=2"]).spec_hash != first
