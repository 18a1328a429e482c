"""`rmspec export`: the thin files are valid Python naming the documented environment variables and
the composite's components; refusals are exit 2 with a hint."""

from __future__ import annotations

import ast

from helpers.composite import composite_section, write_composite_run


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
