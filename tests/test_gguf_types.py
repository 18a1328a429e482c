"""GGUF files rmspec plans from (rmspec.gguf_source), checked against the `gguf` package itself:

- every file type gguf.LlamaFileType defines has its name and bit width in rmspec's table (issue 47 item
  10: IQ3_XS, IQ2_M, IQ1_M, ... were unknown, and the plan and model card dropped the "dequantised from
  N-bit" warning); a type the package adds fails here until the table has it;
- the plan reads head_dim from the header (`attention.key_length`, else `rope.dimension_count`), not
  hidden / heads: Gemma and Qwen3 differ (issue 52);
- `rmspec plan` of a `gguf_file` spec and of a `packaged:` spec imports no torch (the light side).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import need
from rmspec.gguf_source import FILE_TYPES, PACKAGED_GGUF, bits, describe, gguf_source, quantisation

gguf = need("gguf", "pip install -e '.[gguf]'")

DATA = Path(__file__).resolve().parents[1] / "rmspec" / "data" / "demo" / "preferences.jsonl"
HEAVY = ("torch", "transformers", "datasets", "accelerate", "gguf")


def write_gguf(
    path: Path, *, arch: str = "llama", file_type: int = 3, key_length: int | None = None, rope_dims: int = 16
) -> Path:
    """A GGUF header as llama.cpp writes one: hidden 64 over 4 heads (hidden / heads = 16), and a head
    width of its own where key_length is given (as Gemma's and Qwen3's files have)."""
    import numpy as np

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(2)
    writer.add_context_length(512)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_rope_dimension_count(rope_dims)
    if key_length is not None:
        writer.add_key_length(key_length)
        writer.add_value_length(key_length)
    writer.add_file_type(file_type)
    writer.add_token_list([f"t{i}" for i in range(300)])
    writer.add_tensor("token_embd.weight", np.zeros((300, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _file_types() -> list:
    """Every file type of the installed package, but GUESSED (a marker, never written in a file)."""
    return [t for t in gguf.LlamaFileType if t.name != "GUESSED"]


def _width_from_block_sizes(name: str) -> set[int]:
    """The bits each weight has of its own in the quantisation types a file type is made of, from the
    package's block sizes (gguf.GGML_QUANT_SIZES: weights per block, bytes per block): a block's bits per
    weight less its scales (always under one bit a weight): Q4_K_M is Q4_K blocks (144 bytes per 256
    weights: 4.5 -> 4), Q4_1 20 bytes per 32 (5.0 -> 4); IQ3_XS mixes IQ3 blocks (every IQ3 type: 3)."""
    types = {q.name: q for q in gguf.GGMLQuantizationType}
    parts = [q for n, q in types.items() if name == n or name.startswith(n + "_")]
    if not parts:
        family = re.match(r"[A-Z]*\d+", name)
        assert family, name
        parts = [q for n, q in types.items() if n == family.group() or n.startswith(family.group() + "_")]
    assert parts, f"no quantisation type of the gguf package makes up {name}"
    sizes = [gguf.GGML_QUANT_SIZES[q] for q in parts]
    return {8 * size if block == 1 else math.ceil(8 * size / block) - 1 for block, size in sizes}


def test_every_file_type_of_the_gguf_package_has_its_name_and_width():
    types = _file_types()
    assert {t.value for t in types} == set(FILE_TYPES), "rmspec's FILE_TYPES and gguf.LlamaFileType differ"
    for t in types:
        name, width = FILE_TYPES[t.value]
        assert name == t.name.removeprefix("MOSTLY_").removeprefix("ALL_"), t
        assert quantisation({"general.file_type": t.value}) == name
        assert bits(name) == width
        assert _width_from_block_sizes(name) == {width}, (name, width)


@pytest.mark.parametrize("file_type", [t.value for t in _file_types()])
def test_the_plan_says_what_the_weights_were_for_every_file_type(tmp_path, file_type):
    """describe() (plan.json `weights`, the model card, results.json) reads the header the package wrote."""
    path = write_gguf(tmp_path / "m.gguf", file_type=file_type)
    source = gguf_source(str(tmp_path), "m.gguf", None)
    assert source is not None
    said = describe(source)
    name, width = FILE_TYPES[file_type]
    assert (said["quantisation"], said["bits"]) == (name, width)
    if width < 16:
        assert said["note"].startswith(f"weights dequantised from {width}-bit GGUF ({name})"), said
    else:
        assert said["note"] == f"weights converted from GGUF ({name})"
    assert said["file"] == str(path.resolve())


SPEC = """version: 1
name: g
model: {model}
data: {{source: {{kind: files, paths: [{data}]}}, mapping: {{preset: pairs}}}}
approach: {{kind: bradley_terry}}
training: {{max_steps: 2, global_batch_size: 4, max_length: 128}}
hardware: {{device: cpu}}
"""


def _plan_light(spec: Path, out: Path, cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """Plans `spec` in a fresh interpreter through the CLI; the heavy modules it imported."""
    code = (
        "import sys\n"
        "from rmspec.cli.main import cli\n"
        f"cli.main(['plan', {str(spec)!r}, '--out', {str(out)!r}], standalone_mode=False)\n"
        f"print('HEAVY', [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120, env=env or os.environ.copy()
    )
    assert done.returncode == 0, done.stdout + done.stderr
    heavy = next(line for line in done.stdout.splitlines() if line.startswith("HEAVY"))
    return json.loads(heavy.removeprefix("HEAVY ").replace("'", '"'))


def test_head_dim_comes_from_the_header_and_planning_a_gguf_file_imports_no_torch(tmp_path):
    """A Qwen3-like header: 4 heads of 32 over a hidden size of 64 (hidden / heads would say 16)."""
    write_gguf(tmp_path / "q.gguf", arch="qwen3", file_type=29, key_length=32, rope_dims=32)
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.format(model="{name_or_path: ., gguf_file: q.gguf}", data=DATA))
    out = tmp_path / "plan.json"
    assert _plan_light(spec, out, tmp_path) == []
    plan = json.loads(out.read_text())
    shape = plan["model"]["shape"]
    assert shape["hidden_size"] == 64 and shape["num_attention_heads"] == 4
    assert shape["head_dim"] == 32 != 64 // 4
    # the parameters the plan counts: each layer's q, k, v, o projections at head_dim 32, independently
    layer_attention = 64 * 4 * 32 + 2 * (64 * 2 * 32) + 4 * 32 * 64
    assert shape["num_parameters"] >= 2 * layer_attention + 300 * 64
    assert (
        plan["weights"]["quantisation"] == "IQ2_M" and "dequantised from 2-bit GGUF (IQ2_M)" in plan["weights"]["note"]
    )


def test_planning_a_packaged_model_imports_no_torch(tmp_path):
    """`packaged:NAME`: the package is found (never imported) on the path, its GGUF file read for the shape."""
    entry = PACKAGED_GGUF["smollm2-135m-instruct"]
    package = tmp_path / "site" / entry.package
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('rmspec must locate this package, never import it')\n")
    write_gguf(package / entry.file, file_type=3, key_length=32, rope_dims=32)
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.format(model="{name_or_path: 'packaged:smollm2-135m-instruct'}", data=DATA))
    out = tmp_path / "plan.json"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "RMSPEC_CACHE": str(tmp_path / "cache")}
    assert _plan_light(spec, out, tmp_path, env) == []
    plan = json.loads(out.read_text())
    assert plan["weights"]["name"] == "packaged:smollm2-135m-instruct"
    assert plan["weights"]["original"] == entry.original
    assert plan["weights"]["file"] == str((package / entry.file).resolve())
    assert plan["model"]["shape"]["head_dim"] == 32
    assert "dequantised from 4-bit GGUF (Q4_1)" in plan["weights"]["note"]
