"""Benchmark: pictures meant to take `rmspec serve` down (issue 47 item 5), against a real server process.

A tiny offline vision reward model (rmspec.vision.tiny) is served by `rmspec serve` in its own
process. One `/pooling` request carries N real 7999 x 7999 grey PNGs (62 KB each, 64 MB each once
decoded) as data: URIs. Measured per case: the answer's status and wall time, the server's peak
resident memory (VmHWM from /proc) before and after the request, and how long `GET /health` took
while the request was in flight (asked every 0.1 s from another thread).

Cases: twelve pictures under the default limits (refused from their headers: --max-request-megapixels
64); then the limit raised (--max-request-megapixels 1000) with TWO pictures, what every picture cost
before the budget existed (twelve took 5.6 GB and 20 s in the issue's report; two keep this shared
machine usable).

    HF_HUB_OFFLINE=1 python bench/serve_image_limits.py [--write]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def big_png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    packer = zlib.compressobj(9)
    row = b"\0" * (width + 1)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def post(port: int, path: str, body: dict | None, timeout: float = 600) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST" if body is not None else "GET", path, json.dumps(body) if body is not None else None)
    response = conn.getresponse()
    return response.status, response.read().decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def case(model: Path, images: int, flags: list[str]) -> dict:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "rmspec", "serve", str(model), "--port", str(port), *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        deadline = time.time() + 300
        while True:
            try:
                post(port, "/health", None, timeout=2)
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.5)
        uri = "data:image/png;base64," + base64.b64encode(big_png(7999, 7999)).decode()
        parts = [{"type": "image_url", "image_url": {"url": uri}}] * images + [{"type": "text", "text": "Colour?"}]
        body = {"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": "Grey."}]}
        before = peak_mb(server.pid)
        health: list[float] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                started = time.perf_counter()
                post(port, "/health", None)
                health.append(time.perf_counter() - started)
                time.sleep(0.1)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.perf_counter()
        status, text = post(port, "/pooling", body)
        took = time.perf_counter() - started
        done.set()
        watcher.join(30)
        return {
            "images": images,
            "flags": " ".join(flags) or "(defaults)",
            "status": status,
            "seconds": took,
            "before_mb": before,
            "after_mb": peak_mb(server.pid),
            "health_max_ms": 1000 * max(health) if health else 0.0,
            "body_kb": len(json.dumps(body)) / 1024,
            "message": json.loads(text).get("error", {}).get("message", "")[:160] if status != 200 else "",
        }
    finally:
        server.terminate()
        server.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="write bench/results/serve_image_limits.md")
    args = parser.parse_args()
    from rmspec.vision.tiny import build_tiny_vlm

    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_vlm(Path(tmp) / "vlm", seed=3)
        rows = [case(model, 12, []), case(model, 2, ["--max-request-megapixels", "1000"])]
    load = os.getloadavg()[0]
    lines = [
        "# rmspec serve: pictures meant to take it down",
        "",
        "Command: `HF_HUB_OFFLINE=1 python bench/serve_image_limits.py --write`",
        "",
        f"Machine: {os.cpu_count()} CPU cores shared with other engineers' work, {platform.machine()}, Python "
        f"{platform.python_version()}; 1-minute load average {load:.1f} at the end. Model: the tiny offline "
        "Qwen2-VL reward model (rmspec.vision.tiny). Pictures: real 7999 x 7999 grey PNGs, 62 KB each, as data: "
        "URIs in one `/pooling` request. Peak memory: the server process's VmHWM before and after the request; "
        "/health asked every 0.1 s during it.",
        "",
        "| pictures | server flags | body | status | answer after | server peak memory before | after | slowest /health meanwhile |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['images']} | {r['flags']} | {r['body_kb']:.0f} KB | {r['status']} | {r['seconds']:.2f} s | "
            f"{r['before_mb']:.0f} MB | {r['after_mb']:.0f} MB | {r['health_max_ms']:.0f} ms |"
        )
    lines += ["", "Refusal: " + rows[0]["message"], ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        (REPO / "bench" / "results" / "serve_image_limits.md").write_text(text)


if __name__ == "__main__":
    main()
