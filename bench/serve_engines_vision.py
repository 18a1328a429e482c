"""Benchmark (issue 48 item 6): rewards per second of `rmspec serve --engine torch`, `--engine vllm` and vLLM
direct on a vision-language reward model, in one run: the vision row of bench/serve_engines.py.

The model is the one tests/test_export_vllm_idefics3.py runs in vLLM's CPU build (the only vision family whose
vLLM model imports there without torchvision): a tiny Idefics3 (text hidden 256, head_dim 64, a 56 px tower),
trained 2 steps by `rmspec run` on coloured pictures and exported by `rmspec export --to vllm`. Each request is
one conversation with its picture (an OpenAI `image_url` part, a PNG as a data URI) posted to `/classify` with
`use_activation: false`, by 1 and by 32 concurrent clients, each posting one conversation at a time. Pictures of
70 px are split into 2 x 2 tiles plus a global view, as training split them. vLLM direct is the export's
serve.sh with `--enforce-eager`, as `--engine vllm` starts it on a CPU. The rewards of the three are compared.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/serve_engines_vision.py [--requests 160] [--repeats 3] [--write]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
RESULTS = REPO / "bench" / "results" / "serve_engines_vision.md"
NAMES = ("serve --engine torch", "serve --engine vllm", "vLLM direct")


def bodies(work: Path, n: int) -> list[dict]:
    """n conversations (n/2 pairs of 70 px pictures, both answers), each with its picture as a data URI."""
    from rmspec.vision.demo import write_colour_pairs

    rows = [
        json.loads(x) for x in write_colour_pairs(work, "requests", n // 2, seed=3, size=70).read_text().splitlines()
    ]

    def chat(row: dict, reply: str) -> list[dict]:
        data = base64.b64encode((work / row["images"][0]).read_bytes()).decode()
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}}
        content = [image if part["type"] == "image" else part for part in row["prompt"][0]["content"]]
        return [{"role": "user", "content": content}, {"role": "assistant", "content": reply}]

    return [
        {"messages": chat(row, row[side]), "use_activation": False} for row in rows for side in ("chosen", "rejected")
    ]


def measure(url: str, model: str, requests: list[dict], clients: int) -> tuple[float, list[float]]:
    """(rewards per second, rewards in input order) for all requests sent by `clients` threads."""
    from vllm_throughput import post

    def one(body: dict) -> float:
        return post(url + "/classify", {"model": model, **body})["data"][0]["probs"][0]

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        rewards = list(pool.map(one, requests))
    return len(requests) / (time.perf_counter() - start), rewards


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.relative_to(REPO)}")
    args = parser.parse_args()

    from _serve_cells import Cells
    from vllm_throughput import machine

    from helpers.vllm_pictures import train_idefics3
    from rmspec.export.vllm_check import vllm_python

    os.environ["RMSPEC_VLLM_PYTHON"] = vllm_python(None)
    work = Path(tempfile.mkdtemp(prefix="rmspec-engines-vision-"))
    run = train_idefics3(work)
    export = work / "vllm"
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "export", str(run), "--to", "vllm", "-o", str(export)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    requests = bodies(work, args.requests)
    before = machine()
    cells = Cells(measure, requests, args.repeats)

    for name, engine in zip(NAMES[:2], ("torch", "vllm")):
        cells.serve(name, run, engine)
    cells.direct(NAMES[2], export, work / "vllm.log")
    after = machine()
    diff = cells.largest_difference(list(NAMES[1:]), NAMES[0])
    spread = max(cells.rewards[NAMES[0]]) - min(cells.rewards[NAMES[0]])
    cell, mean = cells.cell, cells.mean

    table = "\n".join(f"| {name} | {cells.starts[name]:.0f} s | {cell(name, 1)} | {cell(name, 32)} |" for name in NAMES)
    report = f"""# rewards/s on a vision-language reward model: `rmspec serve --engine torch`, `--engine vllm` and vLLM direct (issue 48)

`HF_HUB_OFFLINE=1 .venv/bin/python bench/serve_engines_vision.py --requests {args.requests} --repeats {args.repeats} --write`

Model: a tiny Idefics3 reward model (text hidden 256, head_dim 64, a 56 px vision tower; tests/test_export_vllm_idefics3.py's),
trained 2 steps by `rmspec run` on coloured pictures, fp32. Requests: {len(requests)} conversations, each one 70 px picture
(2 x 2 tiles and a global view) as a PNG data URI in an `image_url` part, posted to `/classify` with
`use_activation: false`; each client posts one conversation at a time. Mean of {args.repeats} repeats ± standard error.
The servers gave the same rewards (largest difference from `--engine torch`: {diff:.2g}; the rewards span {spread:.3g}).

| server | start (to /health) | 1 client (rewards/s) | 32 clients (rewards/s) |
|---|---|---|---|
{table}

The front door's cost (rewards/s against vLLM direct's): {mean(NAMES[1], 1) / mean(NAMES[2], 1):.2f}x at 1 client,
{mean(NAMES[1], 32) / mean(NAMES[2], 32):.2f}x at 32 clients. `--engine vllm` against `--engine torch`:
{mean(NAMES[1], 1) / mean(NAMES[0], 1):.2f}x at 1 client, {mean(NAMES[1], 32) / mean(NAMES[0], 32):.2f}x at 32.

Machine: {before["cpu"]}, {before["cores"]} cores (1-minute load average {before["load_1m"]:.1f} at the start,
{after["load_1m"]:.1f} at the end). The servers ran one after the other. vLLM runs eager, in float32. Behind rmspec,
a vision-language model's conversations go to vLLM whole (token ids carry no pictures), up to 32 at a time; rmspec
decodes and checks each picture first (its image limits), then sends it on as its own bytes where vLLM decodes them
to the same pixels (these PNGs do), else re-encoded. The torch engine runs with
`OMP_NUM_THREADS=1`, the vLLM rows in the bench's environment. No GPU was lent to this task: GPU figures are not measured.
"""
    print(report)
    if args.write:
        RESULTS.write_text(report)


if __name__ == "__main__":
    main()
