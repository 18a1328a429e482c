"""`rmspec export`: the thin files are valid Python naming the documented environment variables and
the composite's components; refusals are exit 2 with a hint; the verl file, run through verl's own
loader against a running server, keeps components whose names share a prefix apart, and names that
would collide in the output are refused at validate time."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
import yaml
from pydantic import ValidationError

from helpers.ci import need
from helpers.composite import composite_section, write_composite_run
from helpers.serve_process import REPO, ServeProcess
from rmspec.spec.composite import Composite


def test_export_files(cli, tmp_path):
    run = write_composite_run(tmp_path / "run", composite_section())
    for target, function in (("openrlhf", "reward_func"), ("verl", "compute_score")):
        out = tmp_path / f"{target}.py"
        result = cli("export", run, "--to", target, "-o", out)
        assert result.code == 0, result.err
        tree = ast.parse(out.read_text())
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert function in names
        text = out.read_text()
        assert "RMSPEC_REWARD_URL" in text and "RMSPEC_REWARD_TOKEN" in text and "['fmt', 'math', 'rep']" in text
        assert "import torch" not in text and "import rmspec" not in text  # the trainer's env needs neither
    again = cli("export", run, "--to", "verl", "-o", tmp_path / "verl.py")
    assert again.code == 2 and "--overwrite" in again.err


def test_export_refusals(cli, tmp_path):
    run = write_composite_run(tmp_path / "run", composite_section())
    assert cli("export", run, "--to", "verl", "-o", tmp_path / "x.txt").code == 2
    assert cli("export", tmp_path / "nope", "--to", "verl", "-o", tmp_path / "x.py").code == 2
    (tmp_path / "empty").mkdir()
    result = cli("export", tmp_path / "empty", "--to", "verl", "-o", tmp_path / "x.py")
    assert result.code == 2 and "not a run directory" in result.err


def test_verl_compute_score_keeps_components_with_a_shared_prefix_apart(tmp_path):
    """The exported compute_score, loaded by verl's own get_custom_reward_fn and called as verl's reward
    manager calls it, against a running `rmspec serve`: component `m` (a regex, never failing) beside
    `m_strict` (math_answer, failing with no_reference on a row without one). `m_failed` stays 0 where
    only `m_strict` failed (a prefix match read `m_strict_no_reference` as m's failure: issue 41 #1)."""
    need("verl")
    need("fastapi")
    need("math_verify")
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    section = {
        "kind": "composite",
        "components": [
            {"name": "m", "kind": "regex", "pattern": "boxed", "match": "search", "weight": 0.5},
            {"name": "m_strict", "kind": "math_answer", "weight": 1.0, "timeout_s": 60},
        ],
        "on_failure": {"value": 0.0},
    }
    run = write_composite_run(tmp_path / "run", section)
    out = tmp_path / "compute_score.py"
    result = subprocess.run(
        [sys.executable, "-m", "rmspec", "export", str(run), "--to", "verl", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    config = OmegaConf.create({"reward": {"custom_reward_function": {"path": str(out), "name": "compute_score"}}})
    compute_score = get_custom_reward_fn(config)
    proc = ServeProcess(run)
    os.environ["RMSPEC_REWARD_URL"] = proc.url
    try:
        rows = [("$\\boxed{2}$", "2"), ("$\\boxed{2}$", None), ("no answer", "3")]
        got = [compute_score(data_source="math", solution_str=s, ground_truth=g, extra_info={}) for s, g in rows]
    finally:
        del os.environ["RMSPEC_REWARD_URL"]
        proc.stop()
    # by hand: m = 1 when "boxed" is in the response; m_strict = math-verify (0.0 where it failed)
    assert [g["m"] for g in got] == [1.0, 1.0, 0.0]
    assert [g["m_strict"] for g in got] == [1.0, 0.0, 0.0]
    assert [g["m_failed"] for g in got] == [0.0, 0.0, 0.0]
    assert [g["m_strict_failed"] for g in got] == [0.0, 1.0, 1.0]  # no_reference; parse_error
    assert [g["score"] for g in got] == pytest.approx([0.5 * 1 + 1.0 * 1, 0.5 * 1 + 0.0, 0.0 + 0.0])


@pytest.mark.parametrize(
    "names,clash",
    [
        (["math", "math_timeout"], "math_timeout"),
        (["fmt", "fmt_failed"], "fmt_failed"),
        (["fmt", "fmt_error"], "fmt_error"),
        (["score"], "score"),
        (["gated"], "gated"),
    ],
)
def test_component_names_that_would_collide_are_refused(cli, tmp_path, names, clash):
    section = {"kind": "composite", "components": [{"name": n, "kind": "repetition"} for n in names]}
    with pytest.raises(ValidationError, match=clash):
        Composite.model_validate(section)
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump({"version": 1, "name": "c", "approach": section, "eval": {"validation": False}}))
    result = cli("validate", spec)
    assert result.code == 2 and clash in result.err and "Traceback" not in result.err


def test_names_sharing_a_prefix_are_allowed():
    names = ["fmt", "fmt_strict", "math", "math_hard"]
    Composite.model_validate({"kind": "composite", "components": [{"name": n, "kind": "repetition"} for n in names]})
