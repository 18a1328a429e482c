"""The GPU harness: the GPU issue's measurements in order, one Markdown result each, inside 9 minutes.

    python -m bench.gpu.run OUT [--only memory,throughput,serving,exactness,grpo] [--budget-s 540]
                                [--memory-from N] [--tiny]
    python -m bench.gpu.run --missing          # which packages this machine lacks (carry them as wheels)
    python -m bench.gpu.run --wheelhouse DIR   # (here, with PyPI) download them into batches under 60 MiB

Writes OUT/<measurement>.md for each measurement it starts (memory, throughput, serving, exactness,
grpo: issue 32's order), naming the device as nvidia-smi and torch report it. It stops starting cases
when the budget (default 540 s, under the device tool's 10-minute limit) runs out and lists each case
not run with the flag that runs it in the next batch. `--tiny` uses tiny shapes: the CPU dry run
(tests/test_bench_gpu.py) checks that every path writes its file.

The GPU machine has torch 2.11 + CUDA, transformers 5.17, accelerate 1.15 and peft, and no network:
CARRY lists what rmspec's runs need besides those (pinned as in constraints.txt). Measured here,
as manylinux cp311 wheels: 36 files, 75 MiB, of which pyarrow is 52 MiB, so they travel in two
batches (pyarrow alone, then the rest with rmspec's own wheel), each installed with
`pip install --no-index --no-deps --target .gpu-site DIR/batchN/*.whl` and PYTHONPATH=.gpu-site.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib import metadata
from pathlib import Path

CARRY = [
    "pydantic==2.14.3",
    "pydantic_core==2.50.4",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "ruamel.yaml==0.19.1",
    "rich==15.0.0",
    "markdown-it-py==4.3.0",
    "mdurl==0.1.2",
    "Pygments==2.21.0",
    "click==8.5.1",
    "datasets==5.2.0",
    "pyarrow==26.0.1",
    "pandas==3.1.1",
    "python-dateutil==4.0.0",
    "tzdata==2026.6",
    "dill==0.4.1",
    "multiprocess==0.70.19",
    "xxhash==4.1.0",
    "fsspec==2026.9.0",
    "trl==1.16.0",
    "fastapi==0.165.0",
    "starlette==1.10.0",
    "uvicorn==0.54.0",
    "h11==0.16.0",
    "anyio==4.16.0",
    "sniffio==1.3.1",
    "prometheus_client==0.26.0",
    "aiohttp==3.14.5",
    "aiohappyeyeballs==2.7.1",
    "aiosignal==1.4.0",
    "frozenlist==1.8.0",
    "multidict==7.2.1",
    "propcache==0.5.4",
    "yarl==1.25.1",
    "attrs==26.1.0",
    "psutil==7.2.2",
]
BATCH_MIB = 60  # the device tool carries 64 MiB per call, the working tree included


def missing() -> list[str]:
    out = []
    for pin in CARRY:
        name = pin.split("==")[0]
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(pin)
    return out


def batches(sizes: dict[str, int], limit: int = BATCH_MIB * 1024 * 1024) -> list[list[str]]:
    """Wheels packed largest first into batches under ``limit`` bytes (one device call each)."""
    groups: list[tuple[int, list[str]]] = []
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        if size > limit:
            raise SystemExit(f"{name} alone is {size / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB a call carries")
        for i, (used, names) in enumerate(groups):
            if used + size <= limit:
                groups[i] = (used + size, [*names, name])
                break
        else:
            groups.append((size, [name]))
    return [names for _, names in groups]


def wheelhouse(folder: Path) -> None:
    import shutil
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
         "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "-d", str(folder), *CARRY],
        check=True,
    )  # fmt: skip
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(folder), "."], check=True)
    wheels = {p.name: p.stat().st_size for p in folder.glob("*.whl")}
    for i, names in enumerate(batches(wheels), 1):
        target = folder / f"batch{i}"
        target.mkdir(exist_ok=True)
        for name in names:
            shutil.move(str(folder / name), target / name)
        print(f"{target}: {len(names)} wheels, {sum(wheels[n] for n in names) / 2**20:.1f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, help="folder for the Markdown results")
    parser.add_argument("--only", default="memory,throughput,serving,exactness,grpo")
    parser.add_argument("--budget-s", type=float, default=540)
    parser.add_argument("--memory-from", type=int, default=0, help="first memory case (a later batch)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: the CPU dry run")
    parser.add_argument("--missing", action="store_true", help="print the packages to carry that are not installed")
    parser.add_argument("--wheelhouse", type=Path, help="download the wheels to carry into batches")
    args = parser.parse_args(argv)
    if args.missing:
        print("\n".join(missing()) or "nothing missing")
        return 0
    if args.wheelhouse:
        wheelhouse(args.wheelhouse)
        return 0
    if args.out is None:
        parser.error("give the folder for the results (OUT)")

    from bench.gpu.harness import Budget, device_info
    from bench.gpu.measurements import ORDER

    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        parser.error(f"unknown measurement(s) {', '.join(unknown)}; choose from {', '.join(ORDER)}")
    budget = Budget(args.budget_s)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    device = device_info()
    for name in [n for n in ORDER if n in names]:  # the order, whatever --only lists
        started = time.monotonic()
        if name == "memory":
            result = ORDER[name](work, device, budget, args.tiny, args.memory_from)  # type: ignore[call-arg]
        else:
            result = ORDER[name](work, device, budget, args.tiny)
        result.notes.append(f"Wall time: {time.monotonic() - started:.0f} s (budget left {budget.left():.0f} s).")
        (args.out / f"{name}.md").write_text(result.markdown(device))
        print(f"{name}: {args.out / f'{name}.md'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
