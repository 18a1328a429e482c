import contextlib
import json
import os

from rmspec.rundir import RunDir, atomic_write_json, atomic_write_text


def test_atomic_write_leaves_no_temp_and_normal_permissions(tmp_path):
    target = tmp_path / "deep" / "results.json"
    atomic_write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_atomic_write_keeps_old_content_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "status.json"
    atomic_write_text(target, "old")

    def boom(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with contextlib.suppress(KeyboardInterrupt):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]


def test_rundir_names_every_file_inside_its_root(tmp_path):
    run = RunDir(tmp_path)
    assert all(p.parent == tmp_path for p in run.files())
    assert len({p.name for p in run.files()}) == len(run.files())
