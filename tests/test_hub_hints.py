"""Hints that name a Hugging Face command name one the pinned huggingface_hub installs (`hf`)."""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest

from helpers import REPO
from rmspec.errors import RunError


def _installed_scripts() -> set[str]:
    return {ep.name for ep in entry_points(group="console_scripts")}


def test_no_source_file_names_the_removed_cli():
    assert "huggingface-cli" not in _installed_scripts()  # why the hints may not name it
    offenders = [
        str(p.relative_to(REPO)) for p in (REPO / "rmspec").rglob("*.py") if "huggingface-cli" in p.read_text()
    ]
    assert offenders == []


@pytest.mark.parametrize("token_env", ["HF_TOKEN", "MY_HUB_TOKEN"])
def test_push_hint_is_an_hf_upload_that_would_run(tmp_path, monkeypatch, token_env):
    from rmspec.rundir import RunDir
    from rmspec.train.finish import push_to_hub

    run = RunDir(tmp_path)
    run.model.mkdir()
    monkeypatch.delenv(token_env, raising=False)
    spec = SimpleNamespace(name="x", output=SimpleNamespace(hub_token_env=token_env, hub_repo_id="me/rm", private=True))
    with pytest.raises(RunError) as err:
        push_to_hub(run, spec)
    command = re.search(r"`([^`]*)`", err.value.hint).group(1).split()
    assert command[0] in _installed_scripts() and command[:4] == ["hf", "upload", "me/rm", str(run.model)]
    assert "--private" in command  # the spec asked for a private repository
    # hf reads HF_TOKEN itself; another variable must be passed on.
    assert ("--token" in command) == (token_env != "HF_TOKEN")
