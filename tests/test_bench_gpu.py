"""bench/gpu dry-run on CPU with tiny shapes: every measurement writes its Markdown file naming the
device, the batch stops inside its time budget and lists what it left with the flag for the next
batch, and the wheels to carry pack into device calls under the carry limit."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.gpu.run import BATCH_MIB, CARRY, batches  # noqa: E402

MEASUREMENTS = ["memory", "throughput", "serving", "exactness", "grpo"]


def test_a_tiny_batch_writes_every_result_and_stops_inside_its_budget(tmp_path):
    # Enough for the first memory cases (15 s here), not for every measurement: the test needs both a result and a
    # 'Not run'. The batch starts measurements while its budget lasts, so the budget sets the test's time (run alone
    # on this 2-core machine: 100 s took 78 s, 40 s took 36 s).
    budget = 50
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu.run", str(tmp_path / "out"), "--tiny", "--budget-s", str(budget)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=budget + 120,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert elapsed < budget + 40  # the budget bounds the batch (plus interpreter start and the last write)
    for name in MEASUREMENTS:
        text = (tmp_path / "out" / f"{name}.md").read_text()
        assert text.startswith("# ") and "Device: nvidia-smi: not available; torch " in text, name
    memory = (tmp_path / "out" / "memory.md").read_text()
    first = next(line for line in memory.splitlines() if line.startswith("| tiny-L64-unpacked"))
    cells = [c.strip() for c in first.strip("|").split("|")]
    assert cells[1] == "single" and float(cells[2]) > 0 and float(cells[3]) > 0, first
    # the second case ran or is listed with the flag that runs it next
    assert "| tiny-L64-packed" in memory or "--memory-from 1" in memory
    # what did not fit is listed as not run, never silently absent
    later = [(tmp_path / "out" / f"{n}.md").read_text() for n in ("throughput", "serving", "exactness")]
    assert all("Not run:" in text or "| " in text or "Wall time" in text for text in later)
    assert any("Not run:" in text for text in later)


def test_the_wheels_to_carry_pack_into_calls_under_the_limit():
    mib = 2**20
    sizes = {"pyarrow.whl": 52 * mib, "pandas.whl": 12 * mib, "small.whl": 8 * mib, "rmspec.whl": 1 * mib}
    groups = batches(sizes)
    assert sorted(n for g in groups for n in g) == sorted(sizes)
    for group in groups:
        assert sum(sizes[n] for n in group) <= BATCH_MIB * mib
    assert len(groups) == 2
    assert all("==" in pin for pin in CARRY) and any(pin.startswith("trl==") for pin in CARRY)


def test_missing_lists_only_uninstalled_packages():
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu.run", "--missing"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    from importlib import metadata

    def installed(pin: str) -> bool:
        try:
            metadata.version(pin.split("==")[0])
        except metadata.PackageNotFoundError:
            return False
        return True

    absent = [pin for pin in CARRY if not installed(pin)]
    assert done.returncode == 0
    assert done.stdout.split() == (absent or ["nothing", "missing"])
