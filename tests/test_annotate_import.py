"""`annotate import`: results validated (the server validates nothing), swap undone, policies, rejects,
bad exports as exit-2 errors. Exports are written in the shapes measured on Label Studio 1.23.2."""

from __future__ import annotations

import json

import pytest

from helpers.annotate import LEFT, RIGHT, TIE, export_of
from rmspec.annotate.aggregate import aggregate
from rmspec.annotate.exports import parse_export


def _task(result, swapped=False, cancelled=False):
    exp = export_of([{}], [swapped])
    exp[0]["annotations"] = [{"id": 1, "completed_by": 7, "was_cancelled": cancelled, "result": result}]
    exp[0]["data"].update(response_a="A text", response_b="B text")
    return parse_export(exp)[0]


@pytest.mark.parametrize(
    "result, reason",
    [
        ([{"from_name": "pick", "value": {"selected": "left"}}], "unknown from_name 'pick'"),
        ([{"from_name": "pw", "value": {}}], "value.selected is missing"),
        ([{"from_name": "pw", "value": {"selected": "up"}}], "must be left or right, got 'up'"),
        ([{"from_name": "tie", "value": {"choices": ["maybe"]}}], "value.choices must be ['tie']"),
        (LEFT + TIE, "conflicting result"),
        ([], "empty result"),
        ("left", "result is str"),
    ],
)
def test_invalid_results_are_rejected_with_the_reason(result, reason):
    ann = _task(result).annotations[0]
    assert ann.preference is None and reason in ann.error


def test_swap_is_undone():
    assert _task(LEFT).annotations[0].preference == "first"
    assert _task(LEFT, swapped=True).annotations[0].preference == "second"  # A showed the second response
    assert _task(RIGHT, swapped=True).annotations[0].preference == "first"
    t = _task(LEFT, swapped=True)
    assert t.responses() == ("B text", "A text")
    row = aggregate([t]).rows[0]
    assert (row["chosen"], row["rejected"]) == ("A text", "B text")  # the annotator clicked A


def test_cancelled_annotations_are_skipped_and_counted():
    t = _task(LEFT, cancelled=True)
    out = aggregate([t])
    assert out.rows == [] and out.counts["annotations_cancelled"] == 1
    assert out.rejects[0]["reason"] == "all_cancelled"


def test_json_min_recovers_the_swap_from_data_fields():
    rows = [  # JSON_MIN as 1.23.2 writes it: flat, no meta, pw as a list, tie as a string
        {
            "prompt": "p",
            "rmspec_id": "s1",
            "rmspec_kind": "pairwise",
            "response_a": "B",
            "response_b": "A",
            "rmspec_swap": True,
            "id": 1,
            "pw": [{"selected": "right"}],
            "annotator": 2,
            "annotation_id": 1,
        },
        {
            "prompt": "p",
            "rmspec_id": "s1",
            "rmspec_kind": "pairwise",
            "response_a": "B",
            "response_b": "A",
            "rmspec_swap": True,
            "id": 1,
            "tie": "tie",
            "annotator": 3,
            "annotation_id": 2,
        },
        {
            "prompt": "p",
            "rmspec_id": "s1",
            "rmspec_kind": "pairwise",
            "response_a": "B",
            "response_b": "A",
            "rmspec_swap": True,
            "id": 1,
            "pw": [{"selected": "right"}],
            "annotator": 4,
            "annotation_id": 3,
        },
        {
            "prompt": "q",
            "rmspec_id": "s2",
            "rmspec_kind": "pairwise",
            "response_a": "x",
            "response_b": "y",
            "rmspec_swap": False,
            "id": 2,
            "annotator": None,
            "annotation_id": None,
        },
    ]
    tasks = parse_export(rows)
    assert [a.preference for a in tasks[0].annotations] == ["first", "tie", "first"]
    out = aggregate(tasks)
    assert [(r["chosen"], r["rejected"], r["margin"]) for r in out.rows] == [("A", "B", pytest.approx(2 / 3, abs=1e-5))]
    assert out.counts["tasks_rejected"] == {"no_annotation": 1}


def test_policies_and_ties_reconcile():
    labels = [
        {1: "first", 2: "first", 3: "first"},
        {1: "first", 2: "second", 3: "first"},
        {1: "tie", 2: "tie", 3: "second"},
        {1: "first", 2: "second"},
        {},
    ]
    tasks = parse_export(export_of(labels, swaps=[True, False, True, False, True]))
    expect = {
        ("majority", "drop"): (2, {"tie": 1, "no_majority": 1, "no_annotation": 1}),
        ("majority", "keep"): (3, {"no_majority": 1, "no_annotation": 1}),
        ("unanimous", "drop"): (1, {"disagreement": 3, "no_annotation": 1}),
        ("all", "drop"): (9, {"no_annotation": 1}),
        ("all", "keep"): (11, {"no_annotation": 1}),
    }
    for (policy, ties), (rows, rejected) in expect.items():
        out = aggregate(tasks, policy, ties)
        assert out.counts["rows_written"] == rows and out.counts["tasks_rejected"] == rejected, (policy, ties)
        assert out.counts["tasks_read"] == out.counts["tasks_with_rows"] + sum(rejected.values())
        assert out.counts["annotations_read"] == 11
    kept = aggregate(tasks, "majority", "keep").rows
    assert [r["tie"] for r in kept] == [False, False, True] and kept[2]["margin"] == 0.0


def test_import_cli_writes_pairs_and_rejects(tmp_path, cli):
    labels = [{1: "first", 2: "first"}, {1: "first", 2: "second"}, {}]
    (tmp_path / "export.json").write_text(json.dumps(export_of(labels)))
    done = cli("annotate", "import", tmp_path / "export.json", "--out", tmp_path / "out" / "pairs.jsonl")
    assert done.code == 0, done.err
    assert "tasks read" in done.err and "3" in done.err
    pairs = [json.loads(x) for x in (tmp_path / "out" / "pairs.jsonl").read_text().splitlines()]
    rejects = [json.loads(x) for x in (tmp_path / "out" / "pairs.rejects.jsonl").read_text().splitlines()]
    assert [p["id"] for p in pairs] == ["s0"] and {r["reason"] for r in rejects} == {"no_majority", "no_annotation"}


@pytest.mark.parametrize(
    "content, says",
    [
        ("not json", "not a JSON file"),
        ('{"tasks": []}', "expected a JSON list of tasks"),
        ('[{"data": {"text": "hello"}, "annotations": []}]', "came from `rmspec annotate export`"),
        (
            '[{"data": {"prompt": "p", "rmspec_id": "s", "rmspec_kind": "pairwise", "response_a": "a", "response_b": "b"}}]',
            "rmspec_swap is missing",
        ),
        ("[1, 2]", "every element must be an object"),
    ],
)
def test_bad_exports_exit_2_naming_the_file(tmp_path, cli, content, says):
    bad = tmp_path / "export.json"
    bad.write_text(content)
    done = cli("annotate", "import", bad, "--out", tmp_path / "pairs.jsonl")
    assert done.code == 2 and str(bad) in done.err and says in done.err and "Traceback" not in done.err
    assert "hint:" in done.err


def test_missing_export_and_token(tmp_path, cli, monkeypatch):
    done = cli("annotate", "import", tmp_path / "nope.json", "--out", tmp_path / "p.jsonl")
    assert done.code == 2 and "no such export file" in done.err
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    pulled = cli(
        "annotate",
        "import",
        "--from",
        "http://127.0.0.1:9",
        "--project",
        "1",
        "--token-env",
        "NO_SUCH_TOKEN_VAR",
        "--out",
        tmp_path / "p.jsonl",
    )
    assert pulled.code == 2 and "NO_SUCH_TOKEN_VAR is not set" in pulled.err
    monkeypatch.setenv("SOME_TOKEN", "abc")
    down = cli(
        "annotate",
        "import",
        "--from",
        "http://127.0.0.1:9",
        "--project",
        "1",
        "--token-env",
        "SOME_TOKEN",
        "--out",
        tmp_path / "p.jsonl",
    )
    assert down.code == 2 and "is the server running" in down.err and "Traceback" not in down.err


def test_import_and_agreement_stay_light(tmp_path):
    """Reading an export and computing agreement never pull in torch (only --model does)."""
    import subprocess
    import sys

    (tmp_path / "export.json").write_text(json.dumps(export_of([{1: "first", 2: "second"}, {1: "first", 2: "first"}])))
    code = (
        "import sys\nfrom rmspec.cli.main import main\n"
        "for args in (['annotate', 'import', 'export.json', '--out', 'p.jsonl'], ['annotate', 'agreement', 'export.json']):\n"
        "    sys.argv = ['rmspec', *args]\n    try:\n        main()\n    except SystemExit as e:\n        assert not e.code, e.code\n"
        "print('TORCH', 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "TORCH False" in out.stdout
