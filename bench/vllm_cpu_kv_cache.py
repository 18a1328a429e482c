"""vLLM's CPU build: seconds from start to /health with serve.sh's KV cache (VLLM_CPU_KVCACHE_SPACE=1) against
vLLM's own default (a fraction of the machine's RAM, here --gpu-memory-utilization 0.8: the default 0.92
refuses to start unless 92% of the RAM is free). Alternating starts of one exported folder's serve.sh.

    python bench/vllm_cpu_kv_cache.py EXPORT_DIR --python /opt/rmspec-vllm/bin/python --repeats 2 [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "vllm_cpu_kv_cache.md"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_seconds(export: Path, python: str, mode: str) -> tuple[float, str]:
    """Seconds to /health, and the KV cache line of the log."""
    port = free_port()
    env = {**os.environ, "RMSPEC_VLLM_PYTHON": python, "OMP_NUM_THREADS": "1"}
    extra = []
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    extra = ["--gpu-memory-utilization", "0.8"] if mode == "vllm default" else []
    script = (export / "serve.sh").read_text()
    if mode == "vllm default":  # the script as it was before it set the KV cache
        script = script.replace(
            'export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"\n', "unset VLLM_CPU_KVCACHE_SPACE\n"
        )
    runner = export / f".bench-{mode.replace(' ', '-')}.sh"
    runner.write_text(script)
    log = export / f".bench-{mode.replace(' ', '-')}.log"
    t0 = time.time()
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", str(runner), "--enforce-eager", "--port", str(port), *extra],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while time.time() - t0 < 400:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"{mode}: vLLM exited {proc.returncode}; see {log}")
            time.sleep(0.5)
        seconds = time.time() - t0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    found = re.search(r"\((\d+\.\d+)/(\d+\.\d+)\) GiB for KV cache", log.read_text())
    return seconds, f"{found.group(1)} of {found.group(2)} GiB" if found else "?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("export", type=Path)
    parser.add_argument("--python", default="/opt/rmspec-vllm/bin/python")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    modes = ("serve.sh: VLLM_CPU_KVCACHE_SPACE=1", "vllm default")  # the second: vLLM's own sizing at 0.8
    seen: dict[str, list[float]] = {m: [] for m in modes}
    kv: dict[str, str] = {}
    load_before = os.getloadavg()[0]
    for _ in range(args.repeats):
        for mode in modes:
            seconds, kv[mode] = start_seconds(args.export, args.python, mode)
            seen[mode].append(seconds)
            print(f"{mode}: {seconds:.1f} s (KV cache {kv[mode]}), load {os.getloadavg()[0]:.2f}", flush=True)
    rows = [
        f"| {m} | {kv[m]} | {' / '.join(f'{s:.0f}' for s in seen[m])} | {statistics.mean(seen[m]):.0f} |" for m in modes
    ]
    text = "\n".join(
        [
            "# vLLM CPU: start-up with serve.sh's 1 GiB KV cache against vLLM's default",
            "",
            f"Command: `python bench/vllm_cpu_kv_cache.py EXPORT --repeats {args.repeats} --write` (EXPORT: a tiny",
            "Qwen2 reward model, 4 layers, hidden 256, exported by `rmspec export --to vllm`). vllm-cpu 0.32.0, eager.",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other work, "
            f"load {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; starts alternate.",
            "",
            "| KV cache | size | seconds to /health, each start | mean |",
            "|---|---|---|---:|",
            *rows,
            "",
            "vLLM's CPU worker sizes the KV cache as `--gpu-memory-utilization` (default 0.92) of the RAM, and refuses",
            "to start when that much is not free; allocating it is most of the difference. serve.sh exports",
            "`VLLM_CPU_KVCACHE_SPACE=1` unless set: a reward model's requests are prefills of a few thousand tokens.",
            "",
        ]
    )
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
