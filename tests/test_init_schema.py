"""`rmspec init` and `rmspec schema` from an installed package: files it reads ship inside rmspec/,
the `$schema` header names a file that exists, `--data` takes every mapping preset, a hub id or a
file, and `init --example NAME` writes a shipped spec that runs from anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import REPO

PACKAGE = REPO / "rmspec"


def _header_schema(path: Path) -> Path:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    return Path(first.split("$schema=", 1)[1])


@pytest.mark.parametrize("folder", ["templates", "specs", "schemas"])
def test_each_shipped_folder_has_one_home(folder):
    # rmspec/<folder> is what the wheel carries; it is a link to the repository-root folder, never a copy.
    inside, root = PACKAGE / folder, REPO / folder
    assert inside.is_symlink() and not root.is_symlink()
    assert inside.resolve() == root.resolve()


def test_scaffold_reads_only_files_inside_the_package():
    import rmspec.cli.schema_cmd as schema_cmd
    import rmspec.scaffold as scaffold

    for path in (scaffold.TEMPLATES, scaffold.SPECS, scaffold.SCHEMA, scaffold.DEMO_DIR, schema_cmd.DEFAULT_SCHEMA):
        assert Path(os.path.normpath(path)).is_relative_to(PACKAGE), path  # not the checkout around it
        assert path.exists(), path


def test_init_schema_header_names_an_existing_current_schema(cli, tmp_path):
    from rmspec.cli.schema_cmd import schema_text

    out = tmp_path / "deep" / "er" / "s.yaml"
    out.parent.mkdir(parents=True)
    assert cli("init", "--approach", "bradley_terry", "-o", out).code == 0
    ref = _header_schema(out)
    assert ref.is_absolute() and ref.read_text() == schema_text()


def test_schema_print_writes_the_schema_to_stdout_and_no_file(cli, tmp_path, monkeypatch):
    from rmspec.cli.schema_cmd import schema_text

    monkeypatch.chdir(tmp_path)
    result = cli("schema", "--print")
    assert result.code == 0, result.err
    assert result.out == schema_text()
    printed = json.loads(result.out)  # the training spec, or a composite's document where approach.kind says so
    assert printed["$defs"]["Spec"]["properties"]["data"] and printed["then"] == {"$ref": "#/$defs/CompositeSpec"}
    assert list(tmp_path.iterdir()) == []
    clash = cli("schema", "--print", "--check")
    assert clash.code == 2 and "--print" in clash.err


def _approach_for(preset: str) -> str:
    from rmspec.spec.rules import LIST_PRESETS, PAIR_PRESETS, PROCESS_PRESETS, SCORE_PRESETS

    if preset in LIST_PRESETS:
        return "listwise"
    if preset in PAIR_PRESETS:
        return "bradley_terry"
    if preset in SCORE_PRESETS:
        return "pointwise"
    if preset in PROCESS_PRESETS:
        return "process"
    return "generative"


def _preset_names():
    from rmspec.spec.data import PRESETS

    return PRESETS


@pytest.mark.parametrize("preset", _preset_names())
def test_init_data_takes_every_mapping_preset(cli, tmp_path, preset):
    from rmspec.spec import load_spec

    out = tmp_path / "s.yaml"
    result = cli("init", "--approach", _approach_for(preset), "--data", preset, "-o", out)
    assert result.code == 0, result.err
    loaded = load_spec(out)
    assert loaded.spec.data.mapping.preset == preset
    source = loaded.spec.data.source
    if source.kind == "files":  # a shipped example file in that layout: it must exist
        assert all((loaded.base_dir / p).is_file() for p in source.paths)
    else:
        assert source.kind == "huggingface" and "/" in source.path


def test_init_data_takes_a_hub_dataset_id(cli, tmp_path):
    from rmspec.spec import load_spec

    out = tmp_path / "a.yaml"
    assert cli("init", "--approach", "bradley_terry", "--data", "someone/my-prefs", "-o", out).code == 0
    spec = load_spec(out).spec
    source = spec.data.source
    assert (source.kind, source.path, spec.data.mapping.preset) == ("huggingface", "someone/my-prefs", "pairs")
    # A known dataset's id maps as its name does (hh-rlhf: the helpful-base subset, whole transcripts).
    out = tmp_path / "b.yaml"
    assert cli("init", "--approach", "bradley_terry", "--data", "Anthropic/hh-rlhf", "-o", out).code == 0
    spec = load_spec(out).spec
    assert spec.data.mapping.preset == "hh-rlhf" and spec.data.source.data_dir == "helpful-base"
    # --preset says how an unknown id (or a file) is laid out.
    out = tmp_path / "c.yaml"
    bt = ("init", "--approach", "bradley_terry", "--data", "someone/chats")
    result = cli(*bt, "--preset", "conversational", "-o", out)
    assert result.code == 0, result.err
    assert load_spec(out).spec.data.mapping.preset == "conversational"
    bad = cli(*bt, "--preset", "stepwise", "-o", tmp_path / "d.yaml")
    assert bad.code == 2 and "stepwise" in bad.err and not (tmp_path / "d.yaml").exists()


def test_init_data_takes_a_local_file(cli, tmp_path):
    from rmspec.spec import load_spec

    data = tmp_path / "mine" / "prefs.jsonl"
    data.parent.mkdir()
    data.write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n")
    out = tmp_path / "specs" / "s.yaml"
    out.parent.mkdir()
    assert cli("init", "--approach", "bradley_terry", "--data", data, "-o", out).code == 0
    loaded = load_spec(out)
    (path,) = loaded.spec.data.source.paths
    assert not Path(path).is_absolute() and (loaded.base_dir / path).resolve() == data.resolve()
    assert loaded.spec.data.mapping.preset == "pairs"


def test_init_data_refuses_what_it_cannot_read_and_says_what_to_write(cli, tmp_path):
    result = cli("init", "--approach", "bradley_terry", "--data", "nonsense", "-o", tmp_path / "s.yaml")
    assert result.code == 2 and "Traceback" not in result.err
    for word in ("pairs", "conversational", "hh-rlhf", "demo", "org/name", ".jsonl"):
        assert word in result.err
    assert not (tmp_path / "s.yaml").exists()


def _example_names():
    return sorted(p.stem for p in (REPO / "specs").glob("*.yaml"))


@pytest.mark.parametrize("name", _example_names())
def test_init_example_writes_the_shipped_spec_runnable_from_anywhere(cli, tmp_path, name):
    from rmspec import documents

    out = tmp_path / "elsewhere" / f"{name}.yaml"
    out.parent.mkdir()
    result = cli("init", "--example", name, "-o", out)
    assert result.code == 0, result.err
    assert cli("validate", out).code == 0
    kind = documents.of_file(out)  # a composite: its own document, its rows in data.train/validation
    declared = None if kind.trains else kind
    load = kind.load
    written, shipped = load(out), load(REPO / "specs" / f"{name}.yaml")

    def resolved(loaded):  # the same document once every local path is made absolute
        doc = loaded.spec.model_dump(mode="json")
        if declared is not None:
            for key in ("train", "validation"):
                if doc["data"][key]:
                    doc["data"][key] = str((loaded.base_dir / doc["data"][key]).resolve())
            return doc
        sources = [doc["data"]["source"]] if doc["data"]["source"] else [e["source"] for e in doc["data"]["sources"]]
        for source in sources:  # one source, or each dataset of a mixture
            if source["kind"] == "files":
                source["paths"] = [str((loaded.base_dir / p).resolve()) for p in source["paths"]]
        for bench in doc["eval"]["benchmarks"]:
            if bench["path"] and (loaded.base_dir / bench["path"]).exists():
                bench["path"] = str((loaded.base_dir / bench["path"]).resolve())
        return doc

    assert resolved(written) == resolved(shipped)
    assert _header_schema(out).is_file()


def test_init_example_default_file_and_unknown_name(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("init", "--example", "quickstart")
    assert result.code == 0, result.err and (tmp_path / "quickstart.yaml").is_file()
    assert "rmspec run quickstart.yaml" in result.out
    bad = cli("init", "--example", "quickstrat")
    assert bad.code == 2 and "did you mean 'quickstart'" in bad.err
    both = cli("init", "--example", "quickstart", "--approach", "pointwise", "-o", "x.yaml")
    assert both.code == 2 and "--example" in both.err and not (tmp_path / "x.yaml").exists()
