"""`rmspec data report|preview`: JSON contracts, the quickstart demo report, clear errors, and the
light side staying light."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers.data import REPO, make_spec, write_jsonl

QUICKSTART = REPO / "specs" / "quickstart.yaml"


def test_report_json_on_the_quickstart(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("RMSPEC_CACHE_DIR", str(tmp_path / "cache"))
    rejects = tmp_path / "rejects.jsonl"
    res = cli("data", "report", QUICKSTART, "--json", "--rejects", rejects)
    assert res.code == 0, res.err
    report = json.loads(res.out)
    for key in ("rows_read", "rows_kept", "rejected", "splits", "length_heuristic_accuracy"):
        assert key in report
    assert report["rows_read"] >= 3000 and report["reconciled"] is True
    assert report["rows_read"] == report["rows_kept"] + sum(report["rejected"].values())
    assert sum(report["splits"].values()) == report["rows_kept"]
    assert 0.45 <= report["length_heuristic_accuracy"] <= 0.55
    assert set(report["groups"]) == {"facts", "arithmetic", "constraints", "refusals", "tone", "summaries", "relevance"}
    assert rejects.exists()
    # A second run of the same spec loads the prepared data from the cache.
    again = json.loads(cli("data", "report", QUICKSTART, "--json").out)
    assert again["cached"] is True and again["rows_kept"] == report["rows_kept"]


def test_report_human_view(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("RMSPEC_CACHE_DIR", str(tmp_path / "cache"))
    write_jsonl(
        tmp_path / "d.jsonl",
        [{"prompt": "q", "chosen": "a", "rejected": "a"}, {"prompt": "q2", "chosen": "longer answer", "rejected": "b"}],
    )
    make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [{"kind": "drop_identical"}],
        },
    )
    res = cli("data", "report", tmp_path / "spec.yaml")
    assert res.code == 0, res.err
    assert "rows read" in res.out and "identical" in res.out and "length heuristic" in res.out
    assert "100.0%" in res.out  # the one kept pair has the longer response chosen


def test_preview_json(cli):
    res = cli("data", "preview", QUICKSTART, "-n", "3", "--json")
    assert res.code == 0, res.err
    records = json.loads(res.out)
    assert len(records) == 3
    first = json.loads((REPO / "rmspec" / "data" / "demo" / "preferences.jsonl").read_text().splitlines()[0])
    assert records[0]["prompt"] == first["prompt"] and records[0]["chosen"] == first["chosen"]
    assert all({"prompt", "chosen", "rejected"} <= set(r) for r in records)


def test_hub_model_offline_is_a_clear_error(cli, tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "chosen": "a", "rejected": "b"}])
    make_spec(
        tmp_path,
        {"source": {"kind": "files", "paths": ["d.jsonl"]}, "mapping": {"preset": "pairs"}},
        model="no-such-org/no-such-model-xyz",
    )
    res = cli("data", "preview", tmp_path / "spec.yaml")
    assert res.code == 2
    assert "Traceback" not in res.err and "no-such-org/no-such-model-xyz" in res.err
    assert "sentence-transformers/all-MiniLM-L6-v2" in res.err  # the offline alternative


def test_bad_data_exits_2_without_traceback(cli, tmp_path):
    make_spec(tmp_path, {"source": {"kind": "files", "paths": ["missing.jsonl"]}, "mapping": {"preset": "pairs"}})
    res = cli("data", "report", tmp_path / "spec.yaml")
    assert res.code == 2 and "missing.jsonl" in res.err and "Traceback" not in res.err


def test_light_side_imports():
    code = (
        "import sys; import rmspec.cli.data_cmd, rmspec.render.data_view; "
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
