"""Before a launch: a GPU plan on a machine without those GPUs, or a hub model that cannot be had
offline, is refused with exit 2 and a fix, and no run directory is written."""

from __future__ import annotations

import json

import pytest

from helpers import REPO
from rmspec.errors import RmspecError
from rmspec.launch.preflight import check_devices, check_model, preflight
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

NO_GPU = HostFacts((), 16.0, (), 2)


def plan_of(spec: str, *sets: str) -> dict:
    return compile_plan(load_spec(REPO / "specs" / spec, list(sets)), host=NO_GPU).to_json()


def test_gpu_plan_on_a_machine_without_gpus_is_refused():
    plan = plan_of("hh_bt.yaml")
    with pytest.raises(RmspecError, match=r"8 x NVIDIA H100 80GB per node, but this machine has no GPU") as err:
        check_devices(plan, NO_GPU)
    assert "hardware.device=auto" in err.value.hint


def test_too_few_gpus_names_the_ones_found():
    plan = plan_of("hh_bt.yaml")
    two = HostFacts((), 64.0, (("NVIDIA H100 80GB HBM3", 79.6), ("NVIDIA H100 80GB HBM3", 79.6)), 16)
    with pytest.raises(RmspecError, match="this machine has 2 GPU"):
        check_devices(plan, two)
    eight = HostFacts((), 64.0, (("NVIDIA H100 80GB HBM3", 79.6),) * 8, 16)
    check_devices(plan, eight)  # enough: no error


def test_cpu_plan_and_packaged_model_pass_offline():
    preflight(plan_of("quickstart.yaml"), NO_GPU, env={"HF_HUB_OFFLINE": "1"})


def test_uncached_hub_model_is_refused_only_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    plan = plan_of("quickstart.yaml", "model.name_or_path=Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(RmspecError, match="not available offline"):
        check_model(plan, {"HF_HUB_OFFLINE": "1"})
    check_model(plan, {})  # online: it will be downloaded
    snapshot = tmp_path / "empty-cache" / "models--Qwen--Qwen2.5-0.5B-Instruct" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    check_model(plan, {"HF_HUB_OFFLINE": "1"})  # cached: fine


def test_run_refuses_before_writing_the_run_directory(cli, tmp_path, monkeypatch):
    import huggingface_hub.constants

    # The spec's hub model in the cache (as `hf download` leaves it), so the model check passes and the
    # device check is the one that refuses.
    cache = tmp_path / "hub-cache"
    repo = cache / "models--Qwen--Qwen2.5-1.5B-Instruct"
    snapshot = repo / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    config = {  # Qwen2.5-1.5B-Instruct's published shape
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
    }
    (snapshot / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer_config.json", "tokenizer.json"):
        (snapshot / name).write_text("{}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi on this PATH, whatever the machine
    result = cli("run", REPO / "specs" / "hh_bt.yaml")
    assert result.code == 2
    assert "this machine has no GPU" in result.err and "Traceback" not in result.err
    assert not (tmp_path / "runs").exists()
