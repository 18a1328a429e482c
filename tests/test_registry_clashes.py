"""Registries refuse clashes (issue 47 item 9): a plugin that gives an approach, a scorer kind, a
benchmark kind or a reward component the name of a shipped one is refused with both modules named
(exit 2 from the CLI), never silently put in its place (before: `scorers.names()` listed `reward`
twice and the plugin's kind answered for every score-head model).

The approach and the scorer kind come in as an installed plugin would: a dist-info folder whose
entry_points.txt importlib.metadata reads, on PYTHONPATH of a fresh `rmspec` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.runs import rmspec

REPO = Path(__file__).resolve().parent.parent


def _plugin(site: Path, group: str, name: str, value: str, source: str | None) -> None:
    """What `pip install` of a package declaring `[project.entry-points."GROUP"] NAME = VALUE`
    leaves on sys.path, with its module (`source`, unless it is one of tests/helpers) beside it."""
    info = site / f"clash_{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: clash-{name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")
    if source is not None:
        (site / f"{value.partition(':')[0]}.py").write_text(textwrap.dedent(source))


def _env(site: Path, monkeypatch) -> None:
    monkeypatch.delenv("RMSPEC_APPROACHES", raising=False)
    monkeypatch.delenv("RMSPEC_SCORERS", raising=False)
    monkeypatch.setenv("PYTHONPATH", f"{REPO / 'tests'}{os.pathsep}{site}")


def _refused(done, shipped: str, plugin: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert shipped in done.stderr and plugin in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_an_installed_approach_with_a_shipped_name_is_refused(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _plugin(
        site,
        "rmspec.approaches",
        "bradley_terry",
        "clash_approach",
        """
        from helpers.toy_approach import ToyApproach

        class Impostor(ToyApproach):
            name = "bradley_terry"

        APPROACH = Impostor()
        """,
    )
    _env(site, monkeypatch)
    done = rmspec("init", "--help", cwd=tmp_path)  # any command: the registry loads with rmspec
    _refused(done, "rmspec.approaches.bradley_terry", "clash_approach")
    assert "entry point 'bradley_terry' of group rmspec.approaches" in done.stderr


def test_an_installed_approach_with_a_new_name_still_loads(tmp_path, monkeypatch):
    """The control: the same mechanism with the toy's own name registers (the clash, not the plugin,
    is what the test above refuses)."""
    site = tmp_path / "site"
    _plugin(site, "rmspec.approaches", "toy", "helpers.toy_approach", None)
    _env(site, monkeypatch)
    done = subprocess_python("from rmspec import approaches; print(','.join(approaches.names()))", tmp_path)
    assert done.returncode == 0, done.stderr
    names = done.stdout.strip().split(",")
    assert names.count("bradley_terry") == 1 and "toy" in names


def subprocess_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


SCORER = """
from helpers.toy_scorer import SimilarityKind

class Impostor(SimilarityKind):
    kind = "reward"

KIND = Impostor()
"""


def test_an_installed_scorer_kind_with_a_shipped_name_is_refused(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _plugin(site, "rmspec.scorers", "reward", "clash_scorer:KIND", SCORER)
    _env(site, monkeypatch)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"prompt": "p", "response": "r"}\n')
    done = rmspec("score", str(tmp_path), str(rows), "--out", str(tmp_path / "out.jsonl"), cwd=tmp_path)
    _refused(done, "rmspec.inference.scorers.reward", "clash_scorer")
    # in-process, the registry's own answer: never the name twice
    listed = subprocess_python("from rmspec.inference import scorers; print(scorers.names())", tmp_path)
    assert listed.returncode != 0 and "RegistryClash" in listed.stderr, listed.stdout + listed.stderr


def test_register_refuses_shipped_names_in_process():
    """The in-process `register` of every registry that takes kinds from outside: a shipped name from
    another module is refused naming both modules; the shipped module registering again is no clash."""
    from dataclasses import replace

    from helpers import toy_approach, toy_scorer
    from rmspec import approaches
    from rmspec.evaluate import registry
    from rmspec.inference import scorers
    from rmspec.plugin_clash import RegistryClash
    from rmspec.spec.benchmarks import CATALOGUE

    class Impostor(toy_approach.ToyApproach):
        name = "pointwise"

    with pytest.raises(RegistryClash, match=r"rmspec\.approaches\.pointwise and test_registry_clashes"):
        approaches.register(Impostor())
    assert type(approaches.get("pointwise")).__module__ == "rmspec.approaches.pointwise"

    class ScorerImpostor(toy_scorer.SimilarityKind):
        kind = "judge"

    with pytest.raises(RegistryClash, match=r"rmspec\.inference\.scorers\.judge and test_registry_clashes"):
        scorers.register(ScorerImpostor())
    assert list(scorers.names()).count("judge") == 1
    assert type(scorers.get("judge")).__module__ == "rmspec.inference.scorers.judge"

    shipped = CATALOGUE["rewardbench"]
    impostor = replace(shipped, module=__name__)
    with pytest.raises(RegistryClash, match=rf"{shipped.module} and test_registry_clashes"):
        registry.register(impostor, object())  # type: ignore[arg-type]
    assert CATALOGUE["rewardbench"] is shipped


def test_a_component_kind_with_a_shipped_name_is_refused(tmp_path, monkeypatch):
    from rmspec.composite import components
    from rmspec.plugin_clash import RegistryClash
    from rmspec.spec.composite import COMPONENT_SETTINGS

    (tmp_path / "clash_component.py").write_text(
        textwrap.dedent(
            """
            from typing import Literal

            from rmspec.spec.composite_component import ComponentBase

            class Length(ComponentBase):
                kind: Literal["length"]

            SETTINGS = Length

            def build(settings, context):
                raise AssertionError("never built")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(COMPONENT_SETTINGS)
    with pytest.raises(RegistryClash, match=r"rmspec\.composite\.components\.length and clash_component"):
        components.register("clash_component")
    assert components.kinds().count("length") == 1
    assert [s.__module__ for s in COMPONENT_SETTINGS] == [s.__module__ for s in before]
