"""Model shapes without weights: counts checked against published sizes and a real safetensors header."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from rmspec.errors import PlanError
from rmspec.packaged import resolve_model_path
from rmspec.plan.catalog import CATALOG, catalog_config
from rmspec.plan.model_shape import shape_from_config
from rmspec.plan.shape_source import resolve_shape


def _catalog(name):
    key, config = catalog_config(name)
    return shape_from_config(config, key)


# Exact counts from the models' safetensors metadata on the hub (total parameters as published).
PUBLISHED = {
    "meta-llama/Llama-3.1-8B-Instruct": 8_030_261_248,
    "meta-llama/Llama-3.2-1B": 1_235_814_400,
    "meta-llama/Llama-3.3-70B-Instruct": 70_553_706_496,
    "Qwen/Qwen2.5-0.5B-Instruct": 494_032_768,
    "Qwen/Qwen2.5-7B-Instruct": 7_615_616_512,
    "Qwen/Qwen3-8B": 8_190_735_360,
    "mistralai/Mistral-7B-Instruct-v0.3": 7_248_023_552,
    "google/gemma-2-9b-it": 9_241_705_984,
    "microsoft/phi-4": 14_659_507_200,
    "bert-base-uncased": 109_482_240,
}


@pytest.mark.parametrize("name,expected", sorted(PUBLISHED.items()))
def test_catalog_counts_match_published_sizes(name, expected):
    assert _catalog(name).num_parameters == expected


def test_llama_8b_count_by_hand():
    # Embeddings + 32 x (q, k, v, o with GQA 8 KV heads + SwiGLU + 2 RMSNorms) + final norm + untied head.
    h, i, v, kv = 4096, 14336, 128256, 8 * 128
    layer = h * h + 2 * h * kv + h * h + 3 * h * i + 2 * h
    expected = v * h + 32 * layer + h + v * h
    shape = _catalog("meta-llama/Llama-3.1-8B")
    assert shape.num_parameters == expected
    # A reward model drops the LM head and adds an h x 1 score head.
    assert shape.trained_parameters("score") == expected - v * h + h
    assert shape.layer_class == "LlamaDecoderLayer"


def _safetensors_numel(path: Path) -> int:
    with path.open("rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    total = 0
    for name, info in header.items():
        if name == "__metadata__" or name.endswith("position_ids"):
            continue
        count = 1
        for dim in info["shape"]:
            count *= dim
        total += count
    return total


def test_packaged_minilm_from_config_json_matches_its_weights():
    folder = Path(resolve_model_path("sentence-transformers/all-MiniLM-L6-v2"))
    shape = resolve_shape("sentence-transformers/all-MiniLM-L6-v2", str(folder))
    assert shape.source.startswith("config.json in")
    assert (shape.hidden_size, shape.num_layers, shape.vocab_size) == (384, 6, 30522)
    assert shape.layer_class == "BertLayer"
    assert shape.num_parameters == _safetensors_numel(folder / "model.safetensors")


def test_hf_cache_is_read_before_the_catalog(tmp_path):
    snap = tmp_path / "models--acme--tiny-llama" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "intermediate_size": 128,
                "vocab_size": 1000,
                "tie_word_embeddings": True,
            }
        )
    )
    shape = resolve_shape("acme/tiny-llama", "acme/tiny-llama", hub_cache=tmp_path)
    assert "cache" in shape.source
    layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64
    assert shape.num_parameters == 1000 * 64 + 2 * layer + 64


def test_unknown_model_says_how_to_give_the_shape(tmp_path):
    with pytest.raises(PlanError) as err:
        resolve_shape("acme/never-heard-of-it", "acme/never-heard-of-it", hub_cache=tmp_path)
    assert "acme/never-heard-of-it" in err.value.message
    assert "model.shape" in err.value.hint


def test_spec_shape_block_wins(tmp_path):
    from rmspec.spec import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text((Path(__file__).parents[1] / "specs" / "hh_bt.yaml").read_text())
    loaded = load_spec(
        spec,
        [
            "model.name_or_path=acme/private-model",
            "model.shape={architecture: decoder, num_parameters: 3000000000, hidden_size: 2560, num_layers: 32, "
            "num_attention_heads: 32, num_key_value_heads: 8, intermediate_size: 10240, vocab_size: 64000, "
            "layer_class: AcmeBlock}",
        ],
    )
    shape = resolve_shape(loaded.spec.model.name_or_path, "acme/private-model", loaded.spec.model.shape, tmp_path)
    assert shape.num_parameters == 3_000_000_000
    assert shape.layer_class == "AcmeBlock"
    assert shape.kv_dim == 8 * 80


def test_name_variants_resolve():
    assert catalog_config("meta-llama/Meta-Llama-3-8B-Instruct")[0] == "llama-3-8b"
    assert catalog_config("microsoft/deberta-v3-base")[0] == "deberta-v3-base"
    assert catalog_config("Qwen/Qwen3-8B-Base")[0] == "qwen3-8b"
    assert catalog_config("acme/llama-3.1-8b-but-not-really") is None


def test_every_catalog_entry_has_a_layer_class():
    for key, config in CATALOG.items():
        shape = shape_from_config(config, key)
        assert shape.layer_class and shape.num_parameters > 10_000_000, key
