"""A built wheel, installed outside the repository, runs the whole quickstart from an empty folder.

How the fresh environment gets its dependencies without a download: the wheel goes into a new
venv with `pip install --no-deps` (pip runs from the repo venv and targets the new interpreter
with `--python`); only then is a `.pth` file dropped into the new venv's site-packages naming the
repo venv's site-packages. A `.pth` line only appends that folder to `sys.path`; the `.pth` files
inside it are not executed, so the repo's editable install (its `__editable__` finder, which maps
`rmspec` onto the checkout) stays inactive and `import rmspec` finds the wheel's copy, which comes
first on `sys.path`. The test checks that. The dependencies' own console scripts live in the repo
venv's bin/ and were not installed here; `rmspec run` starts `accelerate`, so the fixture writes the
wrapper pip would have written (from accelerate's entry point, with this venv's python). The wheel is
built from a copy of the tracked (and not-ignored new) files, so the build leaves nothing in the
shared working tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow


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


def _run(cmd: list, cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    said = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}\n{said}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, environment) with the freshly built wheel installed."""
    root = tmp_path_factory.mktemp("wheel")
    src, dist, venv = root / "src", root / "dist", root / "venv"
    _copy_tree(src)
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, src],
        root,
        base_env,
    )
    (wheel,) = dist.glob("rmspec-*.whl")
    _run([sys.executable, "-m", "venv", "--without-pip", venv], root, base_env)
    py = venv / "bin" / "python"
    # Install before the .pth exists: pip must not see the repo's rmspec as "already installed".
    _run(
        [sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel], root, base_env
    )
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(_run([py, "-c", where], root, base_env).stdout.strip())
    (purelib / "zz_repo_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (accelerate,) = entry_points(group="console_scripts", name="accelerate")
    script = venv / "bin" / "accelerate"
    script.write_text(
        f"#!{py}\nimport sys\nfrom {accelerate.module} import {accelerate.attr}\nsys.exit({accelerate.attr}())\n"
    )
    script.chmod(0o755)
    env = {
        **base_env,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PATH": f"{venv / 'bin'}:{base_env.get('PATH', '')}",
    }
    return venv, wheel, env


def test_the_wheel_holds_the_files_the_commands_read(installed):
    _venv, wheel, _env = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"rmspec/{folder}/{p.name}"
        for folder in ("templates", "specs", "schemas")
        for p in (REPO / folder).iterdir()
        if p.suffix in (".yaml", ".json")
    }
    expected |= {f"rmspec/data/demo/{p.name}" for p in (REPO / "rmspec" / "data" / "demo").iterdir()}
    assert expected - names == set()


def test_installed_wheel_runs_the_quickstart_from_an_empty_folder(installed, tmp_path):
    venv, _wheel, env = installed
    rm = venv / "bin" / "rmspec"
    work = tmp_path / "empty"
    work.mkdir()
    where = _run([venv / "bin" / "python", "-c", "import rmspec; print(rmspec.__file__)"], work, env).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), f"imported {where}, not the wheel's copy"

    schema = json.loads(_run([rm, "schema", "--print"], work, env).stdout)
    assert "$defs" in schema and "data" in schema["properties"]

    _run([rm, "init", "--approach", "bradley_terry", "-o", "bt.yaml"], work, env)
    header = (work / "bt.yaml").read_text().splitlines()[0]
    ref = header.split("$schema=", 1)[1]
    assert Path(ref).is_absolute() and json.loads(Path(ref).read_text()) == schema
    _run([rm, "validate", "bt.yaml"], work, env)

    _run([rm, "init", "--example", "quickstart", "-o", "quickstart.yaml"], work, env)
    short = ["--set", "data.source.limit=96", "--set", "training.max_length=64"]
    _run([rm, "validate", "quickstart.yaml"], work, env)
    _run([rm, "plan", "quickstart.yaml", *short], work, env)
    report = json.loads(_run([rm, "data", "report", "quickstart.yaml", *short, "--json"], work, env).stdout)
    assert report  # a report, not an empty answer
    _run(
        [rm, "run", "quickstart.yaml", *short, "--set", "training.max_steps=2", "--set", "eval.benchmarks.0.limit=16"],
        work,
        env,
    )
    run_dir = work / "runs" / "quickstart"
    assert (run_dir / "results.json").is_file() and (run_dir / "model" / "config.json").is_file()

    before = (run_dir / "results.json").stat().st_mtime_ns
    _run([rm, "eval", run_dir, "--limit", "8"], work, env)  # a run: its own benchmarks, into RUN/
    assert (run_dir / "results.json").stat().st_mtime_ns > before
    pairs = [{"prompt": f"What is {i} + {i}?", "chosen": str(2 * i), "rejected": str(2 * i + 1)} for i in range(4)]
    (work / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    _run([rm, "eval", run_dir / "model", "--benchmark", "pairs", "--path", "bench.jsonl", "--out", "ev"], work, env)
    assert (work / "ev" / "results.json").is_file()

    rows = [{"prompt": "Name a colour.", "response": r} for r in ("Blue.", "I would rather not.", "Green.")]
    (work / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _run([rm, "score", run_dir, "in.jsonl", "--out", "scored.jsonl"], work, env)
    scored = [json.loads(x) for x in (work / "scored.jsonl").read_text().splitlines()]
    assert len(scored) == len(rows)
