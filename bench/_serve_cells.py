"""Servers started and measured side by side (bench/serve_engines.py, bench/serve_engines_vision.py): each server's rewards/s
at 1 and at 32 clients, repeated, with their means and standard errors, and the rewards it gave last."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLIENTS = (1, 32)
# measure(url, served model name, requests, clients) -> (rewards per second, rewards in input order)
Measure = Callable[[str, str, list[Any], int], tuple[float, list[float]]]


class Cells:
    def __init__(self, measure: Measure, requests: list[Any], repeats: int):
        self.measure, self.requests, self.repeats = measure, requests, repeats
        self.rates: dict[str, dict[int, list[float]]] = {}
        self.rewards: dict[str, list[float]] = {}
        self.starts: dict[str, float] = {}  # seconds from the command to /health answering

    def serve(self, name: str, target: Path, engine: str, *extra: str, cwd: Path | None = None) -> None:
        """`rmspec serve TARGET --engine ENGINE` started, measured and stopped. The torch engine runs on one torch
        thread (docs/score_and_serve.md on shared cores); `--engine vllm` in the bench's own environment, which the
        engine rmspec starts inherits, as vLLM direct runs in it."""
        from helpers.serve_process import REPO, ServeProcess

        started = time.monotonic()
        env = {"OMP_NUM_THREADS": "1"} if engine == "torch" else {}
        server = ServeProcess(
            target, "--no-normalize", "--engine", engine, *extra, env=env, timeout=900, cwd=cwd or REPO
        )
        self.starts[name] = time.monotonic() - started
        try:
            self.run(name, server.url, str(target))
        finally:
            server.stop()

    def direct(self, name: str, export: Path, log: Path) -> None:
        """vLLM direct: the exported folder's serve.sh, eager as `--engine vllm` starts it on a CPU."""
        from helpers.serve_process import free_port
        from rmspec.export.vllm_check import running_server

        started = time.monotonic()
        command = ["bash", str(export / "serve.sh"), "--port", str(free_port()), "--enforce-eager"]
        with running_server(command, log, timeout=900) as url:
            self.starts[name] = time.monotonic() - started
            self.run(name, url, str(export))

    def run(self, name: str, url: str, served_as: str) -> None:
        """One server's cells, after a warm-up of 8 requests from one client."""
        self.measure(url, served_as, self.requests[:8], 1)
        for clients in CLIENTS:
            for _ in range(self.repeats):
                rate, got = self.measure(url, served_as, self.requests, clients)
                self.rates.setdefault(name, {}).setdefault(clients, []).append(rate)
                self.rewards[name] = got
                print(f"{name:>20} clients={clients:>2}: {rate:8.1f} rewards/s", flush=True)

    def mean(self, name: str, clients: int) -> float:
        return statistics.mean(self.rates[name][clients])

    def cell(self, name: str, clients: int) -> str:
        """The mean ± its standard error over the repeats."""
        xs = self.rates[name][clients]
        se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0.0
        return f"{statistics.mean(xs):.1f} ± {se:.1f}"

    def largest_difference(self, names: list[str], reference: str) -> float:
        """The largest difference of any server's last rewards from `reference`'s."""
        return max(abs(a - b) for name in names for a, b in zip(self.rewards[name], self.rewards[reference]))
