"""A composite whose rules need math-verify, on an install without it (issue 41 #3): `rmspec run`
(the composite's own run path), `score`, `serve` and `export` stop before any work with exit 2
naming `rmspec[rules]`, by subprocess with math_verify hidden from the interpreter and from the
pool's spawned workers (a sitecustomize that refuses the import, as a missing package would).
Before, run and score exited 0 with every math_answer counted parse_error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.composite import MATH_ROWS, composite_section, write_composite_run, write_math_rows

REPO = Path(__file__).resolve().parents[1]
HIDE = '''
import sys


class _Missing:
    """math_verify is not installed (as with `pip install rmspec` without [rules])."""

    def find_spec(self, name, path=None, target=None):
        if name == "math_verify" or name.startswith("math_verify."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Missing())
'''


@pytest.fixture
def hidden(tmp_path):
    folder = tmp_path / "hide"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(HIDE)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(folder)}

    def rmspec(*args) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "rmspec", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )

    check = rmspec("--help")
    assert check.returncode == 0, check.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import math_verify"], capture_output=True, text=True, env=env, timeout=60
    )
    assert probe.returncode != 0 and "No module named 'math_verify'" in probe.stderr  # hidden indeed
    return rmspec


def refused(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "rmspec[rules]" in result.stderr and "math_answer" in result.stderr
    assert "nothing was started" in result.stderr  # the extras check itself, not a worker failing later
    assert "Traceback" not in result.stderr and "parse_error" not in result.stderr + result.stdout


def test_run_of_a_composite_spec_stops_before_its_run_directory(hidden, tmp_path):
    rows = write_math_rows(tmp_path / "rows.jsonl")
    spec = tmp_path / "c.yaml"
    spec.write_text(
        yaml.safe_dump({"version": 1, "name": "c", "approach": composite_section(), "data": {"validation": rows.name}})
    )
    result = hidden("run", spec)
    refused(result)
    assert not (tmp_path / "runs").exists()


def test_score_serve_and_export_of_a_composite_run_stop_before_any_work(hidden, tmp_path):
    run = write_composite_run(tmp_path / "run", composite_section())
    rows = write_math_rows(tmp_path / "rows.jsonl")
    out = tmp_path / "scored.jsonl"
    refused(hidden("score", run, rows, "--out", out))
    assert not out.exists()
    refused(hidden("score", run / "reward.yaml", rows, "--out", out))  # the run file itself
    refused(hidden("serve", run, "--port", "1"))  # never bound: refused before
    client = tmp_path / "client.py"
    refused(hidden("export", run, "--to", "verl", "-o", client))
    assert not client.exists()


def test_a_composite_without_rules_needs_no_extra(hidden, tmp_path):
    """Only the kinds that need math-verify ask for it: a regex and repetition composite scores."""
    section = {
        "kind": "composite",
        "components": [
            {"name": "fmt", "kind": "regex", "pattern": "boxed", "match": "search"},
            {"name": "rep", "kind": "repetition"},
        ],
    }
    run = write_composite_run(tmp_path / "run", section)
    rows = write_math_rows(tmp_path / "rows.jsonl")
    result = hidden("score", run, rows, "--out", tmp_path / "scored.jsonl", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    scored = [json.loads(x) for x in (tmp_path / "scored.jsonl").read_text().splitlines()]
    assert [r["fmt"] for r in scored] == [float("boxed" in r) for _, r, _ in MATH_ROWS]
