"""Benchmark: `rmspec serve` under OpenRLHF's load vs a naive one-forward-per-request server.

64 concurrent clients each send single-sample `/get_reward` requests (OpenRLHF's payload, an
aiohttp session per request as its client does) for DURATION seconds (bounded also by a request
cap), first against a naive server (what users write by hand, like OpenRLHF's example serve_rm:
an async endpoint that runs one forward pass per request), then against `rmspec serve` (dynamic
batching). Both load the same model: the quickstart run if one exists (runs/quickstart), else
the packaged all-MiniLM-L6-v2 with a seeded fresh head (same shape, same cost per forward).
Texts are the demo preference data, formatted as OpenRLHF sends them. Loopback only.

    HF_HUB_OFFLINE=1 python bench/serve_load.py [--duration 60] [--clients 64] [--threads 0,1] [--write]
    HF_HUB_OFFLINE=1 python bench/serve_load.py --issue18 [--duration 20] [--write]

`--issue18` measures instead (rmspec serve only): the latency of a 1-text request right after a
client abandoned a 400-text request (its aiohttp timeout fired, as OpenRLHF's does after 180 s),
against the same request on the idle server; and 64 concurrent OpenRLHF 0.11.2 clients, its own
`SingleTurnAgentExecutor._fetch_rewards_via_http`, each posting one query at a time.

Both servers run under each torch thread setting asked for: on cores shared with other work,
two OpenMP threads per process spin against each other and slow single forward passes far more
than batched ones, so the default-threads ratio alone would flatter batching.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


# ---------------------------------------------------------------------- the naive server


def naive_server(model_dir: str, port: int) -> None:
    """One forward per request, inside the async endpoint (OpenRLHF's serve_rm pattern)."""
    import torch
    import uvicorn
    from fastapi import FastAPI, Request
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    app = FastAPI()

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    async def get_reward(request):
        data = await request.json()
        enc = tok(
            data["query"], add_special_tokens=False, padding=True, truncation=True, max_length=256, return_tensors="pt"
        )
        with torch.no_grad():
            rewards = model(**enc).logits[:, 0].tolist()
        return {"rewards": rewards, "scores": rewards, "extra_logs": {}}

    get_reward.__annotations__["request"] = Request  # a real class: this module's annotations are strings
    app.post("/get_reward")(get_reward)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


class NaiveProcess:
    def __init__(self, model_dir: str, env: dict[str, str]):
        from helpers.serve_process import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--naive-server", model_dir, "--port", str(self.port)],
            env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import urllib.request

        for _ in range(900):
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("naive server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


# ---------------------------------------------------------------------- load


async def load(url: str, queries: list[str], clients: int, duration: float, max_requests: int) -> dict:
    import aiohttp

    latencies: list[float] = []
    errors = 0
    sent = 0
    timeout = aiohttp.ClientTimeout(total=180)
    stop_at = time.perf_counter() + duration

    async def client(k: int) -> None:
        nonlocal errors, sent
        i = k
        while time.perf_counter() < stop_at and sent < max_requests:
            sent += 1
            payload = {"query": [queries[i % len(queries)]], "prompts": [""], "labels": [None]}
            i += clients
            started = time.perf_counter()
            try:
                async with (
                    aiohttp.ClientSession(timeout=timeout) as session,
                    session.post(url + "/get_reward", json=payload) as response,
                ):
                    response.raise_for_status()
                    body = await response.json()
                    assert len(body["rewards"]) == 1
                latencies.append(time.perf_counter() - started)
            except Exception:
                errors += 1

    began = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    wall = time.perf_counter() - began
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else float("nan")  # noqa: E731
    return {
        "requests": len(latencies),
        "errors": errors,
        "seconds": wall,
        "rps": len(latencies) / wall,
        "p50": q(0.50),
        "p99": q(0.99),
        "mean": statistics.fmean(latencies) if latencies else float("nan"),
    }


def rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def model_folder(tmp: Path) -> tuple[str, str]:
    run = REPO / "runs" / "quickstart"
    if (run / "model" / "config.json").exists():
        return str(run / "model"), "the trained quickstart run (runs/quickstart/model)"
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmspec.packaged import resolve_model_path

    src = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(src, num_labels=1)
    model.save_pretrained(tmp / "minilm_rm")
    AutoTokenizer.from_pretrained(src).save_pretrained(tmp / "minilm_rm")
    return str(
        tmp / "minilm_rm"
    ), "packaged all-MiniLM-L6-v2 (22M parameters) with a seeded fresh head (no trained quickstart run here)"


def queries_for(model_dir: str, n: int = 2000) -> list[str]:
    from rmspec.inference.engine import RewardEngine

    engine = RewardEngine.load(model_dir)
    engine.max_length = 256  # the quickstart's training.max_length
    rows = [json.loads(x) for x in (REPO / "rmspec/data/demo/preferences.jsonl").read_text().splitlines()[: n // 2]]
    items = [(r["prompt"], r[side]) for r in rows for side in ("chosen", "rejected")]
    return [engine.tokenizer.decode(e.ids, skip_special_tokens=False) for e in engine.encode(items)]


def run_pair(model_dir: str, queries: list[str], args, threads: int) -> dict:
    """The naive server, then rmspec serve, under the same torch thread setting."""
    from helpers.serve_process import ServeProcess

    env = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    results = {}
    for name in ("naive", "rmspec"):
        server = NaiveProcess(model_dir, env) if name == "naive" else ServeProcess(model_dir, env=env)
        pid = server.proc.pid
        try:
            asyncio.run(load(server.url, queries, 4, 3.0, 64))  # warm-up
            before = rss_mb(pid)
            res = asyncio.run(load(server.url, queries, args.clients, args.duration, args.max_requests))
            res["rss_before"], res["rss_after"] = before, rss_mb(pid)
            res["load"] = os.getloadavg()
            results[name] = res
            print(threads, name, json.dumps(res), flush=True)
        finally:
            server.stop()
    return results


async def abandoned(url: str, queries: list[str], big: int = 400, give_up: float = 0.5) -> dict:
    """Next-request latency after a client gives up on a `big`-text request."""
    import aiohttp

    async def one(payload: dict, timeout: float) -> float:
        started = time.perf_counter()
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.post(url + "/get_reward", json=payload) as response,
        ):
            response.raise_for_status()
            await response.json()
        return time.perf_counter() - started

    small = {"query": [queries[0]], "prompts": [""], "labels": [None]}
    idle = sorted([await one(small, 60) for _ in range(5)])[2]
    afters = []
    for k in range(3):
        with contextlib.suppress(asyncio.TimeoutError):
            await one(
                {
                    "query": queries[k * big : (k + 1) * big] or queries[:big],
                    "prompts": [""] * big,
                    "labels": [None] * big,
                },
                give_up,
            )
        afters.append(await one(small, 180))
    return {"idle_median": idle, "after_abandoned": afters, "big": big, "give_up": give_up}


async def openrlhf_clients(url: str, queries: list[str], clients: int, duration: float) -> dict:
    """`clients` concurrent OpenRLHF 0.11.2 executors, each awaiting its own _fetch_rewards_via_http."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(url + "/get_reward")
    latencies: list[float] = []
    missing = 0
    stop_at = time.perf_counter() + duration

    async def client(k: int) -> None:
        nonlocal missing
        i = k
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            try:
                [answer] = await executor._fetch_rewards_via_http([queries[i % len(queries)]], [""], [None])
                assert len(answer["rewards"]) == 1
                latencies.append(time.perf_counter() - started)
            except Exception:
                missing += 1
            i += clients

    began = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    wall = time.perf_counter() - began
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else float("nan")  # noqa: E731
    return {"requests": len(latencies), "errors": missing, "rps": len(latencies) / wall, "p50": q(0.5), "p99": q(0.99)}


def issue18(args) -> None:
    from helpers.serve_process import ServeProcess

    tmp = Path(tempfile.mkdtemp(prefix="serve_load_"))
    model_dir, model_note = model_folder(tmp)
    queries = queries_for(model_dir)
    load_before = os.getloadavg()
    server = ServeProcess(model_dir, env={"OMP_NUM_THREADS": "1"})
    try:
        asyncio.run(load(server.url, queries, 4, 3.0, 64))  # warm-up
        gone = asyncio.run(abandoned(server.url, queries))
        print("abandoned", json.dumps(gone), flush=True)
        many = asyncio.run(openrlhf_clients(server.url, queries, args.clients, args.duration))
        print("openrlhf", json.dumps(many), flush=True)
        _, metrics = server.get("/metrics")
    finally:
        server.stop()
    cancelled = [line for line in metrics.decode().splitlines() if line.startswith("rmspec_cancelled_items_total")]
    text = "\n".join(
        [
            "",
            "## Issue 18: abandoned requests and 64 OpenRLHF 0.11.2 clients",
            "",
            f"Command: `HF_HUB_OFFLINE=1 python bench/serve_load.py --issue18 --duration {args.duration:g} --clients {args.clients}`; "
            f"rmspec serve with OMP_NUM_THREADS=1; {model_note}. Machine: {os.cpu_count()} CPU cores shared with other agents' "
            f"jobs, 1-minute load average {load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; no GPU.",
            "",
            f"- A client that gives up on a {gone['big']}-text request after {gone['give_up']:g} s: the next 1-text request took "
            + ", ".join(f"{x * 1000:.0f} ms" for x in gone["after_abandoned"])
            + f" (three tries) against {gone['idle_median'] * 1000:.0f} ms on the idle server (median of 5). "
            f"Cancelled texts dropped from the queue: {cancelled[0].split()[-1] if cancelled else 'n/a'}.",
            f"- {args.clients} concurrent OpenRLHF 0.11.2 clients (`SingleTurnAgentExecutor._fetch_rewards_via_http`, one query "
            f"each, {args.duration:g} s): {many['requests']} rewards, {many['rps']:.1f} req/s, p50 {many['p50'] * 1000:.0f} ms, "
            f"p99 {many['p99'] * 1000:.0f} ms, {many['errors']} without a reward.",
            "",
        ]
    )
    print(text)
    if args.write:
        path = REPO / "bench" / "results" / "serve_load.md"
        path.write_text(path.read_text() + text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument(
        "--threads",
        default="0,1",
        help="torch threads per server process, comma-separated runs (0: torch's default, one per core)",
    )
    parser.add_argument("--write", action="store_true", help="write bench/results/serve_load.md")
    parser.add_argument("--issue18", action="store_true", help="the abandoned-request and OpenRLHF 0.11.2 client runs")
    parser.add_argument("--naive-server", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.naive_server:
        return naive_server(args.naive_server, args.port)
    if args.issue18:
        return issue18(args)

    tmp = Path(tempfile.mkdtemp(prefix="serve_load_"))
    model_dir, model_note = model_folder(tmp)
    queries = queries_for(model_dir)
    load_before = os.getloadavg()
    runs = {int(t): run_pair(model_dir, queries, args, int(t)) for t in args.threads.split(",")}
    lines = [
        "# rmspec serve under OpenRLHF-style load",
        "",
        f"Command: `HF_HUB_OFFLINE=1 python bench/serve_load.py --duration {args.duration:g} --clients {args.clients} "
        f"--threads {args.threads}" + (" --write`" if args.write else "`"),
        "",
        f"Machine: {os.cpu_count()} CPU cores shared with other engineers' work (no GPU); 1-minute load average "
        f"{load_before[0]:.1f} when the benchmark started. The load generator (aiohttp, one session per request as "
        "OpenRLHF's client does) runs on the same cores.",
        f"Model: {model_note}; max_length 256; {len(queries)} demo texts formatted as OpenRLHF sends them "
        "(decoded, special tokens kept).",
        f"Load: {args.clients} concurrent clients, each sending single-sample `/get_reward` requests for {args.duration:g} s "
        "(requests in flight at the end are awaited and counted).",
        "Naive server: OpenRLHF's example `serve_rm` pattern, one forward pass per request inside the async endpoint.",
        "",
        "| torch threads per server | server | requests | req/s | p50 latency | p99 latency | errors | RSS before | RSS after | load after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for threads, results in runs.items():
        for name, label in (
            ("naive", "naive (one forward per request)"),
            ("rmspec", "rmspec serve (dynamic batching)"),
        ):
            r = results[name]
            lines.append(
                f"| {threads or 'default (2)'} | {label} | {r['requests']} | {r['rps']:.1f} | {r['p50'] * 1000:.0f} ms | "
                f"{r['p99'] * 1000:.0f} ms | {r['errors']} | {r['rss_before']:.0f} MB | {r['rss_after']:.0f} MB | {r['load'][0]:.1f} |"
            )
    lines.append("")
    for threads, results in runs.items():
        naive, ours = results["naive"], results["rmspec"]
        lines.append(
            f"- threads {threads or 'default (2)'}: rmspec serve {ours['rps'] / naive['rps']:.2f}x the naive server's "
            f"throughput, p99 {ours['p99']:.1f} s vs {naive['p99']:.1f} s."
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (REPO / "bench" / "results" / "serve_load.md").write_text(text)


if __name__ == "__main__":
    main()
