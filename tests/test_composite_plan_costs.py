"""`rmspec plan` of a composite: a model component's memory follows its own dtype and device options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmspec.spec.composite_models import ModelComponent


def _folder(tmp_path: Path, dtype: str, nbytes: int) -> Path:
    folder = tmp_path / "rm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"dtype": dtype}), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"\0" * nbytes)
    return folder


@pytest.mark.parametrize(
    ("files", "loads", "expected_gb"),
    [
        ("float32", None, 0.4),  # unset: float32, as rmspec score loads it
        ("float32", "bfloat16", 0.2),  # half the bytes per weight
        ("bfloat16", "float32", 0.8),  # bf16 files loaded in fp32 take twice their size
        ("float16", "float16", 0.4),
    ],
)
def test_memory_is_the_files_at_the_dtype_it_loads(
    tmp_path: Path, files: str, loads: str | None, expected_gb: float
) -> None:
    folder = _folder(tmp_path, files, 400_000_000)
    component = ModelComponent(kind="model", name="rm", path=str(folder), dtype=loads)
    costs = component.plan_costs(tmp_path)
    assert costs["device_memory_gb"] == pytest.approx(expected_gb)
    assert costs["dtype"] == (loads or "float32")
    assert costs["device"] == "cpu"


def test_device_named_is_the_device_shown(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "float32", 1000)
    costs = ModelComponent(kind="model", name="rm", path=str(folder), device="cuda:1").plan_costs(tmp_path)
    assert costs["device"] == "cuda:1"


def test_a_folder_without_config_has_no_memory_figure(tmp_path: Path) -> None:
    costs = ModelComponent(kind="model", name="rm", path=str(tmp_path / "missing")).plan_costs(tmp_path)
    assert costs["device_memory_gb"] is None
