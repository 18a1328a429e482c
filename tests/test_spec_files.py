"""Every shipped spec and template validates; init writes specs that validate; the schema is current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

SHIPPED = sorted((REPO / "specs").glob("*.yaml")) + sorted((REPO / "templates").glob("*.yaml"))


def test_the_expected_specs_ship():
    names = {p.name for p in (REPO / "specs").glob("*.yaml")}
    assert {
        "hh_bt.yaml",
        "ultrafeedback_bt.yaml",
        "helpsteer2_pointwise.yaml",
        "judge_generative.yaml",
        "quickstart.yaml",
        "quickstart_prm.yaml",
        "prm_math_shepherd.yaml",
    } <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_file_validates(cli, path: Path):
    result = cli("validate", path)
    assert result.code == 0, result.err
    first = path.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    schema = (path.parent / first.split("$schema=", 1)[1]).resolve()
    assert schema == REPO / "schemas" / "rmspec.schema.json"


@pytest.mark.parametrize("approach", ["bradley_terry", "pointwise", "generative", "process"])
def test_init_output_validates_without_edits(cli, tmp_path, approach):
    out = tmp_path / "sub" / f"{approach}.yaml"
    out.parent.mkdir()
    result = cli("init", "--approach", approach, "-o", out)
    assert result.code == 0, result.err
    text = out.read_text()
    assert "# Peak learning rate." in text  # comments come from the field descriptions
    assert cli("validate", out).code == 0
    from rmspec.spec import load_spec

    assert load_spec(out).spec.approach.kind == approach


def test_init_with_data_and_model(cli, tmp_path):
    out = tmp_path / "s.yaml"
    result = cli(
        "init", "--approach", "bradley_terry", "--data", "hh-rlhf", "--model", "Qwen/Qwen2.5-0.5B-Instruct", "-o", out
    )
    assert result.code == 0, result.err
    from rmspec.spec import load_spec

    spec = load_spec(out).spec
    assert spec.data.mapping.preset == "hh-rlhf"
    assert spec.data.source.path == "Anthropic/hh-rlhf"
    assert spec.model.name_or_path == "Qwen/Qwen2.5-0.5B-Instruct"


def test_init_refuses_unknown_preset_and_existing_file(cli, tmp_path):
    out = tmp_path / "s.yaml"
    bad = cli("init", "--approach", "bradley_terry", "--data", "hh-rlfh", "-o", out)
    assert bad.code == 2 and "did you mean 'hh-rlhf'" in bad.err
    assert cli("init", "--approach", "bradley_terry", "-o", out).code == 0
    again = cli("init", "--approach", "bradley_terry", "-o", out)
    assert again.code == 2 and "exists" in again.err


def test_init_without_flags_off_a_terminal_says_what_to_pass(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    result = cli("init")
    assert result.code == 2
    assert "--approach" in result.err


def test_schema_is_current_and_every_field_is_described(cli):
    assert cli("schema", "--check").code == 0
    schema = json.loads((REPO / "schemas" / "rmspec.schema.json").read_text())

    undocumented = []
    for name, definition in [("Spec", schema), *schema["$defs"].items()]:
        for field, prop in definition.get("properties", {}).items():
            if "description" not in prop:
                undocumented.append(f"{name}.{field}")
    # `kind` discriminators are self-describing literals in the variant models.
    assert [u for u in undocumented if not u.endswith(".kind")] == []


def test_schema_check_fails_when_stale(cli, tmp_path):
    stale = tmp_path / "schema.json"
    stale.write_text("{}")
    assert cli("schema", "--check", "--out", stale).code == 1
    assert cli("schema", "--out", stale).code == 0
    assert cli("schema", "--check", "--out", stale).code == 0


LIGHT_PROBE = """
import sys, runpy
sys.argv = ["rmspec", *sys.argv[1:]]
try:
    runpy.run_module("rmspec", run_name="__main__")
except SystemExit:
    pass
heavy = [m for m in ("torch", "transformers", "datasets", "accelerate") if m in sys.modules]
print("HEAVY=" + ",".join(heavy))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["validate", "specs/hh_bt.yaml"],
        ["validate", "specs/quickstart.yaml"],
        ["schema", "--check"],
        ["init", "--approach", "pointwise", "-o", "{tmp}/x.yaml"],
        ["validate", "specs/composite_math.yaml"],  # a document of its own, through the registry
        ["plan", "specs/composite_math.yaml"],
        ["init", "--approach", "composite", "-o", "{tmp}/c.yaml"],
        ["init", "--example", "multimodal", "-o", "{tmp}/m.yaml"],  # the tiny model is built by a subprocess
    ],
)
def test_light_commands_never_import_torch(tmp_path, args):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run(
        [sys.executable, "-c", LIGHT_PROBE, *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert "HEAVY=\n" in proc.stdout or proc.stdout.strip().endswith("HEAVY="), proc.stdout + proc.stderr


def test_version_flag(cli):
    from rmspec import __version__

    result = cli("--version")
    assert result.code == 0 and __version__ in result.out
