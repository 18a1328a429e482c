"""rmspec.serve.batcher.Batcher on its own: batches side by side for an engine in its own process
(batches_at_once), one at a time for torch in the server's process; every request gets its own results."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rmspec.serve.batcher import Batcher


class Engine:
    """A scoring call that doubles each item and records how many calls ran at the same moment."""

    def __init__(self, seconds: float = 0.2):
        self.seconds, self.running, self.peak, self.calls = seconds, 0, 0, []
        self.lock = threading.Lock()

    def run(self, items: list[int]) -> list[int]:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.calls.append(list(items))
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
        return [2 * x for x in items]


async def score(engine: Engine, at_once: int, requests: list[list[int]]) -> tuple[list[list[int]], Batcher]:
    batcher = Batcher(engine.run, lambda x: 1, max_batch_items=2, max_wait=0.001, batches_at_once=at_once)
    batcher.start()
    results = await asyncio.gather(*(batcher.submit(r) for r in requests))
    await batcher.stop(timeout=5)
    return results, batcher


@pytest.mark.parametrize("at_once", [1, 2, 3])
def test_at_most_batches_at_once_batches_run_side_by_side(at_once):
    engine = Engine()
    requests = [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12]]  # a batch holds 2 items: 6 batches
    results, batcher = asyncio.run(score(engine, at_once, requests))
    assert results == [[2 * x for x in r] for r in requests]
    assert engine.peak == at_once
    assert sorted(x for call in engine.calls for x in call) == list(range(1, 13))  # each item computed once
    assert batcher.in_flight == 0 and batcher.depth == 0


def test_a_failing_batch_fails_its_requests_only():
    def run(items: list[int]) -> list[int]:
        time.sleep(0.05)
        if 13 in items:
            raise RuntimeError("the engine refused this batch")
        return [2 * x for x in items]

    async def main():
        batcher = Batcher(run, lambda x: 1, max_batch_items=2, max_wait=0.001, batches_at_once=2)
        batcher.start()
        outcomes = await asyncio.gather(
            batcher.submit([1, 2]), batcher.submit([13, 14]), batcher.submit([3, 4]), return_exceptions=True
        )
        await batcher.stop(timeout=5)
        return outcomes

    good, bad, other = asyncio.run(main())
    assert good == [2, 4] and other == [6, 8]
    assert isinstance(bad, RuntimeError) and "refused" in str(bad)


def test_stop_waits_for_the_batches_running_side_by_side():
    engine = Engine(seconds=1.0)

    async def main():
        batcher = Batcher(engine.run, lambda x: 1, max_batch_items=1, max_wait=0.001, batches_at_once=2)
        batcher.start()
        pending = [asyncio.ensure_future(batcher.submit([k])) for k in (1, 2)]
        for _ in range(200):  # until both batches run (at once: the engine's calls last 1 s each)
            if engine.running == 2:
                break
            await asyncio.sleep(0.01)
        assert batcher.in_flight == 2 and engine.running == 2
        started = time.perf_counter()
        await batcher.stop(timeout=5)
        stopped_in = time.perf_counter() - started
        # stop() returns once the batches have handed their results over; the requests' own tasks
        # take a few loop turns more to finish (shield's callback, then the task's step)
        return await asyncio.gather(*pending), stopped_in

    results, stopped_in = asyncio.run(main())
    assert results == [[2], [4]]  # neither batch was abandoned (they would fail with QueueFull)
    assert stopped_in < 4  # it waited for the batches, not for its timeout


def test_the_server_takes_as_many_batches_at_once_as_its_engine(tmp_path):
    """The server's batcher takes its engine's figure: torch 1 (it shares the server's cores), vLLM 1 (more
    split the requests into smaller batches: bench/results/serve_engines.md), and an engine saying 3, 3."""
    from helpers.models import build_model
    from rmspec.inference.engine import load_scorer
    from rmspec.inference.engine_vllm import VllmEngine
    from rmspec.serve.service import Service

    scorer = load_scorer(build_model("llama", tmp_path / "m"))
    assert Service(scorer, model_name="m").make_batcher().batches_at_once == 1
    scorer.backend = VllmEngine(process=None, model="m", dtype="float32", started_in=0.0)  # type: ignore[arg-type]
    assert Service(scorer, model_name="m").make_batcher().batches_at_once == VllmEngine.batches_at_once == 1
    scorer.backend.batches_at_once = 3  # type: ignore[union-attr]
    assert Service(scorer, model_name="m").make_batcher().batches_at_once == 3


def test_the_first_request_waits_as_long_as_its_engine_needs_unless_told(tmp_path):
    """torch waits 5 ms for company (fuller forward passes); vLLM batches concurrent requests itself, so its front
    door does not wait; --max-wait-ms (Limits.max_wait_ms) wins over either."""
    from helpers.models import build_model
    from rmspec.inference.engine import load_scorer
    from rmspec.inference.engine_vllm import VllmEngine
    from rmspec.serve.service import Limits, Service

    scorer = load_scorer(build_model("llama", tmp_path / "m"))
    assert Service(scorer, model_name="m").make_batcher().max_wait == pytest.approx(0.005)
    assert Service(scorer, model_name="m", limits=Limits(max_wait_ms=2)).make_batcher().max_wait == pytest.approx(0.002)
    scorer.backend = VllmEngine(process=None, model="m", dtype="float32", started_in=0.0)  # type: ignore[arg-type]
    assert Service(scorer, model_name="m").make_batcher().max_wait == 0.0
    assert Service(scorer, model_name="m", limits=Limits(max_wait_ms=2)).make_batcher().max_wait == pytest.approx(0.002)
