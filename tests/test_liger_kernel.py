"""training.liger_kernel: auto | on | off. Liger's kernels used to be switched on silently whenever
liger_kernel was importable on CUDA; now the plan decides, says why, and `on` is refused where it
cannot apply. The installed package's table of model types is read without importing it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import REPO
from helpers.ci import need
from rmspec.errors import PlanError
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.plan.liger import installed_model_types
from rmspec.spec import load_spec

GPU_SPEC = REPO / "specs" / "hh_bt.yaml"  # Qwen2 on H100s
CPU_SPEC = REPO / "specs" / "quickstart.yaml"  # MiniLM (bert) on CPU


def host(types: tuple[str, ...] | None) -> HostFacts:
    return HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8, liger_model_types=types)


def plan(spec: Path, sets: list[str], types: tuple[str, ...] | None):
    return compile_plan(load_spec(spec, sets), host=host(types), sets=sets)


def test_auto_on_cpu_or_not_installed_writes_nothing():
    assert "liger_kernel" not in plan(CPU_SPEC, ["hardware.cpu_memory_gb=16"], ("bert", "llama")).to_json()
    assert "liger_kernel" not in plan(GPU_SPEC, [], None).to_json()


def test_auto_on_gpu_follows_the_installed_table():
    on = plan(GPU_SPEC, [], ("llama", "qwen2")).liger_kernel
    assert on["enabled"] is True and "qwen2" in on["reason"] and on["reason"].startswith("auto")
    off = plan(GPU_SPEC, [], ("llama", "mistral")).liger_kernel
    assert off["enabled"] is False and "'qwen2'" in off["reason"] and "llama, mistral" in off["reason"]


def test_off_never_and_says_so():
    got = plan(GPU_SPEC, ["training.liger_kernel=off"], ("qwen2",)).to_json()["liger_kernel"]
    assert got == {"enabled": False, "reason": "training.liger_kernel: off"}


@pytest.mark.parametrize(
    "spec, sets, types, words",
    [
        (GPU_SPEC, [], None, "not installed"),
        (GPU_SPEC, [], ("llama",), "no kernels for model type 'qwen2'"),
        (CPU_SPEC, ["hardware.device=auto", "hardware.cpu_memory_gb=16"], ("bert",), "CPU"),  # detected: no GPU
    ],
)
def test_on_refused_where_it_cannot_apply(spec, sets, types, words):
    with pytest.raises(PlanError) as err:
        plan(spec, [*sets, "training.liger_kernel=on"], types)
    assert words in str(err.value) and "training.liger_kernel: auto" in (err.value.hint or "")


def test_on_applies_where_it_can():
    got = plan(GPU_SPEC, ["training.liger_kernel=on"], ("qwen2",)).liger_kernel
    assert got["enabled"] is True


def test_validate_refuses_on_for_a_cpu_spec(cli):
    result = cli("validate", CPU_SPEC, "--set", "training.liger_kernel=on")
    assert result.code == 2, result.out + result.err
    assert "training.liger_kernel" in result.err + result.out


def test_plan_view_shows_the_decision(cli, tmp_path):
    result = cli("plan", CPU_SPEC, "--set", "hardware.cpu_memory_gb=16")
    assert result.code == 0, result.err
    line = next(x for x in result.out.splitlines() if x.startswith("liger kernels"))
    assert "off" in line and "CPU" in line


def test_round_trip_keeps_the_decision():
    from rmspec.plan import Plan

    p = plan(GPU_SPEC, [], ("qwen2",))
    assert Plan.from_json(json.loads(json.dumps(p.to_json()))).liger_kernel == p.liger_kernel


def test_installed_table_read_without_import(tmp_path, monkeypatch):
    import importlib
    import sys

    pkg = tmp_path / "liger_kernel"
    (pkg / "transformers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "transformers" / "monkey_patch.py").write_text(
        "def f(**k):\n    pass\n\nMODEL_TYPE_TO_APPLY_LIGER_FN = {\n    'qwen2': f,\n    'llama': f,\n}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert installed_model_types() == ("llama", "qwen2")
    assert "liger_kernel" not in sys.modules


def test_training_arguments_follow_the_plan(monkeypatch):
    need("transformers")
    from rmspec.errors import RmspecError
    from rmspec.train import arguments

    on_plan = plan(GPU_SPEC, [], ("qwen2",))
    off_plan = plan(GPU_SPEC, [], ("llama",))
    spec = load_spec(GPU_SPEC).spec
    monkeypatch.setattr(arguments, "liger_available", lambda: True)
    assert arguments.use_liger_kernel(spec, on_plan) is True
    assert arguments.use_liger_kernel(spec, off_plan) is False  # installed on CUDA, but not for this model type
    off = load_spec(GPU_SPEC, ["training.liger_kernel=off"]).spec
    assert arguments.use_liger_kernel(off, on_plan) is False
    monkeypatch.setattr(arguments, "liger_available", lambda: False)
    assert arguments.use_liger_kernel(spec, on_plan) is False  # the plan was made elsewhere; here it cannot run
    on = load_spec(GPU_SPEC, ["training.liger_kernel=on"]).spec
    with pytest.raises(RmspecError):
        arguments.use_liger_kernel(on, on_plan)
